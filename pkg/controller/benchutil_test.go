package controller_test

import (
	"context"
	"math"
	"slices"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Helpers shared by the benchmarks (bench_test.go, converge_bench_test.go,
// drift_bench_test.go, scale_bench_test.go).

// quietLogs discards controller-runtime's logs, as it does on its own 30 s into the process,
// but without the warning it prints then: that warning, printed in the middle of a benchmark's
// result line, makes the line unreadable for benchstat. Benchmarks call it first.
func quietLogs() { ctrl.SetLogger(logr.Discard()) }

// quiesce waits until the fixture's manager has made no API request (reads, writes or events)
// for quiet, so that the asynchronous tail of one measured step (the event broadcaster's
// writes, follow-up reconciles) does not load the API server during the next one. It fails the
// benchmark after 20 s.
func (f *fixture) quiesce(quiet time.Duration) {
	f.t.Helper()
	total := func() int {
		writes, reads, events, _ := f.calls.split()
		return len(writes) + len(reads) + len(events)
	}
	last, since := total(), time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), quiet/5, 20*time.Second, false, func(context.Context) (bool, error) {
		if n := total(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quiet, nil
	})
	if err != nil {
		f.t.Fatalf("manager did not go quiet for %s within 20 s", quiet)
	}
}

// percentile returns the p-th percentile (0 < p ≤ 1, nearest rank) of samples, 0 without any.
func percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// ms converts d to milliseconds, for the *-ms metrics.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// processCPUTime returns the CPU time (user and system) this process has used so far, as the
// kernel counts it (getrusage RUSAGE_SELF): every goroutine of the test process, the manager's
// informers and workqueues included, but not the API server, which is another process.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
