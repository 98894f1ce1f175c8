package poll

import (
	"context"
	"strings"
	"testing"
	"time"
)

// fatalRecorder records Fatalf instead of stopping the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Context() context.Context { return context.Background() }

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = format
	for _, a := range args {
		if s, ok := a.(string); ok {
			r.msg += " " + s
		}
	}
}

func TestUntil(t *testing.T) {
	tests := []struct {
		name     string
		doneAt   int // the call that first answers ""; 0: never
		wantFail bool
	}{
		{name: "done at once", doneAt: 1},
		{name: "done on the third call", doneAt: 3},
		{name: "never done", wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fatalRecorder{TB: t}
			calls := 0
			Until(r, "the thing", time.Second, func(context.Context) string {
				calls++
				if tt.doneAt > 0 && calls >= tt.doneAt {
					return ""
				}
				return "still waiting for x"
			})
			if failed := r.msg != ""; failed != tt.wantFail {
				t.Fatalf("failed = %v (%q), want %v", failed, r.msg, tt.wantFail)
			}
			if tt.wantFail && (!strings.Contains(r.msg, "the thing") || !strings.Contains(r.msg, "still waiting for x")) {
				t.Errorf("failure %q does not name what and the last answer", r.msg)
			}
			if !tt.wantFail && calls != tt.doneAt {
				t.Errorf("cond called %d times, want %d", calls, tt.doneAt)
			}
		})
	}
}

func TestTrue(t *testing.T) {
	r := &fatalRecorder{TB: t}
	True(r, "the flag", 3*Interval, func(context.Context) bool { return false })
	if !strings.Contains(r.msg, "the flag") {
		t.Errorf("failure %q does not name what", r.msg)
	}
	r = &fatalRecorder{TB: t}
	calls := 0
	True(r, "the flag", time.Second, func(context.Context) bool { calls++; return calls == 2 })
	if r.msg != "" || calls != 2 {
		t.Errorf("failure %q after %d calls, want none after 2", r.msg, calls)
	}
}

// TestUntil_KeepsTheAnswerBeforeTheDeadline: an answer given in the last second before the
// deadline (a client's rate limiter refusing to wait) does not hide what the condition said
// before; it is reported when it is all there is.
func TestUntil_KeepsTheAnswerBeforeTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		timeout time.Duration
		want    string
	}{
		{timeout: 1500 * time.Millisecond, want: "the real state"},
		{timeout: 500 * time.Millisecond, want: "rate: Wait(n=1) would exceed context deadline"},
	} {
		t.Run(tc.timeout.String(), func(t *testing.T) {
			r := &fatalRecorder{TB: t}
			Until(r, "the thing", tc.timeout, func(ctx context.Context) string {
				if dl, ok := ctx.Deadline(); ok && time.Until(dl) < time.Second {
					return "rate: Wait(n=1) would exceed context deadline"
				}
				return "the real state"
			})
			if !strings.Contains(r.msg, tc.want) {
				t.Errorf("failure %q, want it to say %q", r.msg, tc.want)
			}
		})
	}
}
