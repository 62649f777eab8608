// Package server implements vendorgraphv1.VendorGraphService.
package server

import (
	"github.com/jackc/pgx/v5/pgxpool"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
)

// Server answers VendorGraphService calls.
type Server struct {
	vendorgraphv1.UnimplementedVendorGraphServiceServer
	pool *pgxpool.Pool
}

// New returns a server backed by pool.
func New(pool *pgxpool.Pool) *Server { return &Server{pool: pool} }
