package graph_test

import (
	"os"
	"testing"

	"github.com/kdag-dev/kdag/pkg/testing/leak"
)

func TestMain(m *testing.M) {
	os.Exit(leak.Check(m.Run))
}
