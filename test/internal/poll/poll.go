// Package poll waits in tests for a condition the cluster reaches on its own.
package poll

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Until calls cond every interval, with the test's context, until it returns "" (done) or
// timeout passes; then it fails the test with what and cond's last answer, which says what is
// still missing. An answer given while the test's context was ending is not kept.
func Until(t testing.TB, what string, interval, timeout time.Duration, cond func(ctx context.Context) string) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(t.Context(), interval, timeout, true, func(ctx context.Context) (bool, error) {
		answer := cond(ctx)
		if ctx.Err() == nil {
			last = answer
		}
		return answer == "", nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s: %s", what, timeout, last)
	}
}
