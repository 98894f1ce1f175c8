// Package names turns test names into Kubernetes object names, for the namespaces that
// pkg/testing/envtest and pkg/testing/cluster create per test.
package names

import "strings"

// DNSLabel turns s (a test name) into a lowercase RFC 1123 label of at most limit characters:
// letters and digits kept, every other run of characters one dash, no dash at either end; "test"
// when nothing is left.
func DNSLabel(s string, limit int) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= limit {
			break
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		return "test"
	}
	return out
}
