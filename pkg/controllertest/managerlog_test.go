package controllertest

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// fakeTB is the part of testing.TB a ManagerLog uses, with Failed set by the test.
type fakeTB struct {
	testing.TB
	failed   bool
	logs     []string
	cleanups []func()
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Name() string      { return "TestX/sub" }
func (f *fakeTB) Failed() bool      { return f.failed }
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Logf(format string, args ...any) {
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

func TestManagerLog(t *testing.T) {
	for _, tc := range []struct {
		name             string
		failed, keepEnv  bool
		wantShown, kept  bool
		wantPathInLogTab bool
	}{
		{name: "a passing test removes it", failed: false},
		{name: "a failing test shows its tail and keeps it", failed: true, wantShown: true, kept: true},
		{name: "KDAG_KEEP_LOGS keeps a passing test's", keepEnv: true, kept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.keepEnv {
				t.Setenv(KeepLogsEnv, "1")
			} else {
				t.Setenv(KeepLogsEnv, "")
			}
			tb := &fakeTB{TB: t, failed: tc.failed}
			l := NewManagerLog(tb)
			t.Cleanup(func() { os.Remove(l.Path()) })
			for i := range LogTailLines + 5 {
				l.Logger().Info("reconciled", "line", i)
			}
			for _, fn := range tb.cleanups {
				fn()
			}
			if _, err := l.Write([]byte("after the end\n")); err != nil {
				t.Errorf("Write after the test's end: %v", err)
			}
			shown := strings.Join(tb.logs, "\n")
			if got := strings.Contains(shown, `"line": 204`); got != tc.wantShown {
				t.Errorf("last line shown = %v, want %v; test log:\n%s", got, tc.wantShown, shown)
			}
			if strings.Contains(shown, `"line": 4}`) {
				t.Errorf("a line before the last %d shown", LogTailLines)
			}
			_, err := os.Stat(l.Path())
			if kept := err == nil; kept != tc.kept {
				t.Errorf("file kept = %v, want %v", kept, tc.kept)
			}
			if tc.kept && !strings.Contains(shown, l.Path()) {
				t.Errorf("the test log does not name the file %s:\n%s", l.Path(), shown)
			}
		})
	}
}
