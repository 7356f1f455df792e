// Package apiretry retries a read-modify-write against the API server
// when it lost a race (409 Conflict), and returns the error the last try
// gave, whatever it is.
//
// client-go's retry.OnError and retry.RetryOnConflict do not: when the
// function fails with an error that wraps context.DeadlineExceeded or
// context.Canceled (a read or write that ran out of its caller's time),
// wait.Interrupted takes it for the backoff's own timeout and they return
// the last retriable error instead, which is nil when no conflict came
// before. A write that never happened then looks written. An agent's
// status report was lost that way: a conflict, then a fresh read that
// timed out on a busy API server, then nil; the agent took the report as
// written and never wrote it again.
package apiretry

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// OnConflict calls fn until it returns anything but a conflict, at most
// backoff.Steps times (once when Steps is 0 or 1), sleeping backoff's
// steps in between, and returns fn's last error.
func OnConflict(backoff wait.Backoff, fn func() error) error {
	for {
		err := fn()
		if err == nil || !apierrors.IsConflict(err) || backoff.Steps <= 1 {
			return err
		}
		time.Sleep(backoff.Step())
	}
}
