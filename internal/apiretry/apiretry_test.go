package apiretry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

var fast = wait.Backoff{Steps: 4, Duration: time.Millisecond, Factor: 1}

func conflict() error {
	return apierrors.NewConflict(schema.GroupResource{Group: "pier.dev", Resource: "loadbalancers"}, "a", errors.New("modified"))
}

// TestTimeoutIsReturned: a try that ran out of time, first or after a
// conflict, gives its error back. client-go's helper returns nil for the
// first case (a read that times out on the first try, as the kube store's
// read after its own cached write conflicted) and the conflict for the
// second; the last check says when that changes, and then this package
// can go.
func TestTimeoutIsReturned(t *testing.T) {
	timedOut := fmt.Errorf("get a: %w", context.DeadlineExceeded)
	for _, conflictsFirst := range []int{0, 1} {
		calls := 0
		fn := func() error {
			calls++
			if calls <= conflictsFirst {
				return conflict()
			}
			return timedOut
		}
		if err := OnConflict(fast, fn); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("after %d conflicts: OnConflict = %v, want the timeout", conflictsFirst, err)
		}
		if calls != conflictsFirst+1 {
			t.Fatalf("fn called %d times, want %d", calls, conflictsFirst+1)
		}
	}
	upstream := retry.OnError(fast, apierrors.IsConflict, func() error { return timedOut })
	t.Logf("client-go's retry.OnError for a timeout on the first try: %v", upstream)
	if upstream != nil {
		t.Log("client-go now returns the error: OnConflict may no longer be needed")
	}
}

func TestOnConflict(t *testing.T) {
	other := errors.New("forbidden")
	cases := []struct {
		name      string
		results   []error
		want      error
		wantCalls int
	}{
		{"success at once", []error{nil}, nil, 1},
		{"success after conflicts", []error{conflict(), conflict(), nil}, nil, 3},
		{"another error is not retried", []error{other}, other, 1},
		{"another error after a conflict", []error{conflict(), other}, other, 2},
		{"conflicts until the steps run out", []error{conflict(), conflict(), conflict(), conflict(), nil}, conflict(), 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			err := OnConflict(fast, func() error {
				r := c.results[calls]
				calls++
				return r
			})
			if calls != c.wantCalls {
				t.Fatalf("fn called %d times, want %d", calls, c.wantCalls)
			}
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("err = %v, want nil", err)
			case c.want != nil && apierrors.IsConflict(c.want) && !apierrors.IsConflict(err):
				t.Fatalf("err = %v, want a conflict", err)
			case c.want != nil && !apierrors.IsConflict(c.want) && !errors.Is(err, c.want):
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}
