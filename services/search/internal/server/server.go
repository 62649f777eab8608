// Package server implements searchv1.SearchService.
package server

import (
	"github.com/jackc/pgx/v5/pgxpool"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

// Server answers SearchService calls.
type Server struct {
	searchv1.UnimplementedSearchServiceServer
	pool *pgxpool.Pool
}

// New returns a server backed by pool.
func New(pool *pgxpool.Pool) *Server { return &Server{pool: pool} }
