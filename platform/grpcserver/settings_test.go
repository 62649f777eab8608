package grpcserver

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/rpcauth"
)

const devReadDigest = "4f0caddd3ae07e7b2cd69195e2323aaf1b7381de9886af408a507ff88f92be4a"

func TestLoadCredentials(t *testing.T) {
	read := rpcauth.DigestOf("r").String()
	ingest := rpcauth.DigestOf("i").String()
	tests := []struct {
		name string
		env  map[string]string
		want rpcauth.Credentials
		err  string
	}{
		{"read and ingest", map[string]string{"BMCIS_READ_TOKEN_SHA256": read, "BMCIS_INGEST_TOKEN_SHA256": ingest},
			rpcauth.Credentials{rpcauth.Read: rpcauth.DigestOf("r"), rpcauth.Ingest: rpcauth.DigestOf("i")}, ""},
		{"none configured", nil, nil, "BMCIS_READ_TOKEN_SHA256: no caller credential is configured"},
		{"not a digest", map[string]string{"BMCIS_READ_TOKEN_SHA256": "hunter2"}, nil, "BMCIS_READ_TOKEN_SHA256: must be the SHA-256"},
		{"one credential for two roles", map[string]string{"BMCIS_READ_TOKEN_SHA256": read, "BMCIS_ADMIN_TOKEN_SHA256": read}, nil,
			"BMCIS_ADMIN_TOKEN_SHA256: is the same credential as BMCIS_READ_TOKEN_SHA256"},
		// The dev overlay's published read credential, "dev-only-insecure-read-credential".
		{"published digest", map[string]string{"BMCIS_READ_TOKEN_SHA256": devReadDigest}, nil,
			"BMCIS_READ_TOKEN_SHA256: is the digest of a published credential"},
		{"published digest, in development", map[string]string{"BMCIS_READ_TOKEN_SHA256": devReadDigest, config.EnvAllowInsecureSecrets: "true"},
			rpcauth.Credentials{rpcauth.Read: rpcauth.DigestOf("dev-only-insecure-read-credential")}, ""},
		{"shared, in development", map[string]string{"BMCIS_READ_TOKEN_SHA256": read, "BMCIS_ADMIN_TOKEN_SHA256": read, config.EnvAllowInsecureSecrets: "true"},
			rpcauth.Credentials{rpcauth.Read: rpcauth.DigestOf("r"), rpcauth.Admin: rpcauth.DigestOf("r")}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := config.FromMap(tc.env)
			s := LoadSettings(env, "x", Defaults{GRPCAddr: ":1", RequireCredentials: true})
			if tc.err != "" {
				require.ErrorContains(t, env.Err(), tc.err)
				require.NotContains(t, env.Err().Error(), "hunter2")
				require.NotContains(t, env.Err().Error(), devReadDigest)
				if len(tc.env) > 0 {
					// A credential was given, though refused: its own
					// message says why, not that none is configured.
					require.NotContains(t, env.Err().Error(), "no caller credential is configured")
				}
				return
			}
			require.NoError(t, env.Err())
			require.Equal(t, tc.want, s.Credentials)
		})
	}
}
