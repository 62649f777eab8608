// Package server implements authv1.AuthService.
package server

import (
	"github.com/jackc/pgx/v5/pgxpool"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
)

// Server answers AuthService calls.
type Server struct {
	authv1.UnimplementedAuthServiceServer
	pool *pgxpool.Pool
}

// New returns a server backed by pool.
func New(pool *pgxpool.Pool) *Server { return &Server{pool: pool} }
