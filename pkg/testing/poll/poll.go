// Package poll waits in tests for a condition the API server or the cluster reaches on its own:
// a cache catching up, a controller writing a status, a Deployment rolling out.
//
//	poll.Until(t, "Widget web Ready", time.Minute, func(ctx context.Context) string {
//		w := &testapi.Widget{}
//		if err := cl.Get(ctx, key, w); err != nil {
//			return err.Error()
//		}
//		if !meta.IsStatusConditionTrue(w.Status.Conditions, "Ready") {
//			return "not Ready yet"
//		}
//		return ""
//	})
//
// A condition answers with what is still missing, so that a test that times out says why.
package poll

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Interval is how often Until and True call their condition.
const Interval = 100 * time.Millisecond

// Until calls cond every Interval, with the test's context, until it returns "" (done) or
// timeout passes; then it fails t with "<what>: not within <timeout>: <cond's last answer>", the
// answer saying what is still missing. An answer given while the context was ending (its error
// set, or its deadline less than a second away, when a client's rate limiter already refuses to
// wait) is not kept when an earlier one was: it says nothing about the condition. It returns only
// once cond is done.
func Until(t testing.TB, what string, timeout time.Duration, cond func(ctx context.Context) string) {
	t.Helper()
	last, ending := "", ""
	err := wait.PollUntilContextTimeout(t.Context(), Interval, timeout, true, func(ctx context.Context) (bool, error) {
		answer := cond(ctx)
		if dl, ok := ctx.Deadline(); ctx.Err() != nil || ok && time.Until(dl) < time.Second {
			ending = answer
		} else {
			last = answer
		}
		return answer == "", nil
	})
	if err != nil {
		if last == "" {
			last = ending
		}
		t.Fatalf("%s: not within %s: %s", what, timeout, last)
	}
}

// True is Until for a condition with nothing to say but whether it holds: it calls cond every
// Interval until it returns true, and fails t with "<what>: not within <timeout>" when it has not
// within timeout.
func True(t testing.TB, what string, timeout time.Duration, cond func(ctx context.Context) bool) {
	t.Helper()
	Until(t, what, timeout, func(ctx context.Context) string {
		if cond(ctx) {
			return ""
		}
		return "still false"
	})
}
