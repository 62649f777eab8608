// Package tlsconfig builds the TLS settings of gRPC servers and clients
// from files named in the environment, in one place, so every service and
// every caller (the adapter, the gateway, bmcisctl) turns TLS on the same way.
//
// Servers: BMCIS_TLS_CERT_FILE and BMCIS_TLS_KEY_FILE (PEM) serve TLS;
// BMCIS_TLS_CLIENT_CA_FILE also requires client certificates signed by that
// CA (mutual TLS). Clients: BMCIS_TLS_CA_FILE verifies the servers against
// that CA (the system roots otherwise, once BMCIS_TLS is true), and
// BMCIS_TLS_CLIENT_CERT_FILE / BMCIS_TLS_CLIENT_KEY_FILE present a client
// certificate. Unset, traffic is plaintext, fenced by NetworkPolicies.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Variable names.
const (
	EnvCertFile       = "BMCIS_TLS_CERT_FILE"
	EnvKeyFile        = "BMCIS_TLS_KEY_FILE"
	EnvClientCAFile   = "BMCIS_TLS_CLIENT_CA_FILE"
	EnvCAFile         = "BMCIS_TLS_CA_FILE"
	EnvClientCertFile = "BMCIS_TLS_CLIENT_CERT_FILE"
	EnvClientKeyFile  = "BMCIS_TLS_CLIENT_KEY_FILE"
	EnvEnabled        = "BMCIS_TLS"
)

// Server returns the server TLS configuration, or nil for plaintext.
func Server(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		if clientCAFile != "" {
			return nil, fmt.Errorf("%s needs %s and %s", EnvClientCAFile, EnvCertFile, EnvKeyFile)
		}
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%s and %s go together", EnvCertFile, EnvKeyFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load the server certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Client returns the client TLS configuration, or nil for plaintext: TLS is
// on when a CA file or client certificate is named, or enabled is true.
func Client(enabled bool, caFile, certFile, keyFile string) (*tls.Config, error) {
	if !enabled && caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, fmt.Errorf("%s and %s go together", EnvClientCertFile, EnvClientKeyFile)
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("load the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// ClientFromEnv is Client with the process environment's settings.
func ClientFromEnv() (*tls.Config, error) {
	enabled := os.Getenv(EnvEnabled) == "true"
	return Client(enabled, os.Getenv(EnvCAFile), os.Getenv(EnvClientCertFile), os.Getenv(EnvClientKeyFile))
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("CA file " + file + " holds no PEM certificate")
	}
	return pool, nil
}
