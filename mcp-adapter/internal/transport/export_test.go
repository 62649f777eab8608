package transport

// NewServer exposes newServer to the tests.
var NewServer = newServer
