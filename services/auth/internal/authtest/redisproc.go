package authtest

import (
	"testing"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// RedisProc is a private redis-server for one test (platform/stacktest's).
type RedisProc = stacktest.Redis

// StartRedis starts a private redis-server on a free loopback port.
func StartRedis(t testing.TB) *RedisProc { return stacktest.StartRedis(t) }
