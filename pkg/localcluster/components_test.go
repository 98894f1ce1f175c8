package localcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestAlive: this process runs; a child that exited and was reaped does not; a pid file that
// holds no process id is an error.
func TestAlive(t *testing.T) {
	if !alive(os.Getpid()) {
		t.Error("alive(own pid) = false")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no `true` to run: %v", err)
	}
	if alive(cmd.Process.Pid) {
		t.Errorf("alive(%d) = true for a reaped child", cmd.Process.Pid)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{"good.pid": strconv.Itoa(os.Getpid()) + "\n", "bad.pid": "x", "zero.pid": "0"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if pid, err := readPid(filepath.Join(dir, "good.pid")); err != nil || pid != os.Getpid() {
		t.Errorf("readPid(good) = %d, %v", pid, err)
	}
	for _, name := range []string{"bad.pid", "zero.pid", "missing.pid"} {
		if _, err := readPid(filepath.Join(dir, name)); err == nil {
			t.Errorf("readPid(%s) succeeded", name)
		}
	}
}

// TestAlive_Zombie: a child that exited but is not reaped yet answers signal 0; it is not alive.
func TestAlive_Zombie(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: zombies cannot be told apart")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skipf("no `true` to run: %v", err)
	}
	pid := cmd.Process.Pid
	defer func() { _ = cmd.Wait() }()
	// Until Wait, the exited child stays a zombie.
	for range 200 {
		if !alive(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("alive(%d) = true for an exited, unreaped child", pid)
}
