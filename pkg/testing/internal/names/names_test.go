package names

import "testing"

func TestDNSLabel(t *testing.T) {
	tests := map[string]struct {
		in    string
		limit int
		want  string
	}{
		"subtest":        {in: "TestApply_NoOp/create_then_update", limit: 50, want: "testapply-noop-create-then-update"},
		"cut at limit":   {in: "TestAVeryLongName", limit: 8, want: "testaver"},
		"no dash at end": {in: "Test__x__", limit: 50, want: "test-x"},
		"nothing left":   {in: "/_/", limit: 50, want: "test"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := DNSLabel(tt.in, tt.limit); got != tt.want {
				t.Errorf("DNSLabel(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
			}
		})
	}
}
