package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/grpcclient"
)

// Exit codes, the same for every command (docs/BMCISCTL.md
// and every help text list them).
const (
	exitOK = 0
	// exitFailed: the command did not do what was asked (a service's error
	// other than the ones below, a file that cannot be read).
	exitFailed = 1
	// exitUsage: the command line is wrong (unknown command or flag, a
	// missing or bad argument), or a setting it reads is refused (a
	// published placeholder as a password); nothing was done.
	exitUsage = 2
	// exitRefused: a service refused the credential (missing, unknown, or
	// not allowed this call).
	exitRefused = 3
	// exitUnavailable: a service could not be reached or did not answer in
	// time; retrying later may work.
	exitUnavailable = 4
	// exitPartial: some items failed and the rest were done (documents an
	// ingestion refused, ids a delete did not find); the output lists them.
	exitPartial = 5
)

// exitCodeSummary is the table in one line, for help texts.
const exitCodeSummary = "0 done, 1 failed, 2 usage or a refused setting, 3 refused (credential), 4 unavailable (service unreachable or too slow), 5 partial (some items failed, the rest done)"

// errPartial marks a command that did part of its work (exitPartial).
var errPartial = errors.New("partial")

// exitCode prints err (if any) for the command that ran and returns its
// exit code.
func exitCode(cmd *cobra.Command, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	name := "bmcisctl"
	if cmd != nil && cmd.HasParent() {
		name += " " + cmd.Name()
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command") {
		// cobra's, with its "did you mean" suggestions.
		fmt.Fprintf(stderr, "bmcisctl: %s\nRun `bmcisctl help` for the commands.\n", strings.TrimRight(msg, "\n"))
		return exitUsage
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, describe(err))
	return classify(err)
}

// describe renders err for people. Commands wrap a service's error with
// what they were doing and return it; it is rendered here, once, as
// "message (Code)" in place of grpc's "rpc error: code = ... desc = ...",
// which the wrapping carries along in the error's text.
func describe(err error) string {
	text := err.Error()
	if grpcclient.NotGRPC(err) {
		// grpc-go's "error reading server preface: http2: frame too large"
		// tells an operator nothing about the port they gave.
		return notGRPCMessage(err)
	}
	var se interface {
		error
		GRPCStatus() *status.Status
	}
	if !errors.As(err, &se) {
		return text
	}
	st := se.GRPCStatus()
	plain := st.Code().String()
	if st.Message() != "" {
		plain = st.Message() + " (" + plain + ")"
	}
	return strings.Replace(text, se.Error(), plain, 1)
}

// classify maps an error to its exit code.
func classify(err error) int {
	switch {
	case errors.Is(err, errUsage), errors.Is(err, grpcclient.ErrBadAddress), grpcclient.NotGRPC(err), errors.Is(err, config.ErrInvalid):
		return exitUsage
	case errors.Is(err, errPartial):
		return exitPartial
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		switch st.Code() {
		case codes.Unauthenticated, codes.PermissionDenied:
			return exitRefused
		case codes.Unavailable, codes.DeadlineExceeded:
			return exitUnavailable
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return exitUnavailable
	}
	return exitFailed
}

var grpcRetries = regexp.MustCompile(`max retries exhausted: failed after \d+ attempts: `)

// notGRPCMessage replaces the gRPC error of an address that answered
// HTTP/1.x: what the command was doing (the wrapping before the gRPC
// error), then what is wrong and what to give instead.
func notGRPCMessage(err error) string {
	what := err.Error()
	var se interface {
		error
		GRPCStatus() *status.Status
	}
	if errors.As(err, &se) {
		what, _, _ = strings.Cut(what, se.Error())
	}
	// grpc-go's retry wrapper says nothing a retry could change here.
	what = strings.TrimSuffix(grpcRetries.ReplaceAllString(what, ""), ": ")
	if what != "" {
		what += ": "
	}
	return what + "not a gRPC address: the server there answered HTTP/1.x (a REST, health or metrics port?); " +
		"give the service's gRPC HOST:PORT (search 50051, vendorgraph 50052, auth 50053 by default)"
}
