package leak

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { os.Exit(Check(m.Run)) }

func TestCheck(t *testing.T) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	leaky := func() int {
		go func() { <-stop }()
		return 0
	}
	tests := []struct {
		name string
		run  func() int
		opts []goleak.Option
		want int
	}{
		{name: "no goroutine left", run: func() int { return 0 }, want: 0},
		{name: "the tests' failure code is kept", run: func() int { return 3 }, want: 3},
		{name: "a goroutine left fails", run: leaky, want: 1},
		{name: "an ignored goroutine does not", run: leaky, opts: []goleak.Option{goleak.IgnoreTopFunction("github.com/kdag-dev/kdag/pkg/testing/leak.TestCheck.func2.1")}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Check(tc.run, tc.opts...); got != tc.want {
				t.Errorf("Check = %d, want %d", got, tc.want)
			}
		})
	}
}
