package v1alpha1

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestNodeIndices_RoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		indices []int32
		want    NodeIndices
	}{
		{"none", nil, ""},
		{"one", []int32{3}, "3"},
		{"two apart", []int32{0, 2}, "0,2"},
		{"a run of two", []int32{4, 5}, "4-5"},
		{"a full first layer", seq(0, 49), "0-49"},
		{"runs and singles", []int32{0, 1, 2, 5, 7, 8, 9, 11}, "0-2,5,7-9,11"},
		{"declaration order kept", []int32{2, 1}, "2,1"},
		{"a run after a larger index", []int32{9, 3, 4, 5}, "9,3-5"},
		{"descending is not a run", []int32{5, 4, 3}, "5,4,3"},
		{"large indices", []int32{98, 99}, "98-99"},
		{"the largest int32", []int32{2147483646, 2147483647}, "2147483646-2147483647"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FormatNodeIndices(tc.indices)
			if got != tc.want {
				t.Fatalf("FormatNodeIndices(%v) = %q, want %q", tc.indices, got, tc.want)
			}
			back, err := got.Indices()
			if err != nil || !slices.Equal(back, tc.indices) {
				t.Fatalf("%q.Indices() = %v, %v; want %v", got, back, err, tc.indices)
			}
		})
	}
}

func TestNodeIndices_RefusesMalformed(t *testing.T) {
	for _, tc := range []struct {
		in, wantErr string
	}{
		{",", `item ""`},
		{"1,", `item ""`},
		{"a", "not a non-negative integer"},
		{"-1", `item "-1"`},
		{"1-", `item "1-"`},
		{"1--3", "not a non-negative integer"},
		{"3-1", "from a smaller index to a larger one"},
		{"2-2", "from a smaller index to a larger one"},
		{"+1", "not a non-negative integer"},
		{" 1", "not a non-negative integer"},
		{"2147483648", "not an int32 index"},
		{"0-2147483647", "more than 100 indices"}, // would allocate 8 GiB
		{"0-99,100", "more than 100 indices"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := NodeIndices(tc.in).Indices()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.in) {
				t.Fatalf("%q.Indices() = %v, %v; want an error naming it with %q", tc.in, got, err, tc.wantErr)
			}
		})
	}
	if got, err := NodeIndices("0-99").Indices(); err != nil || len(got) != MaxGraphNodes {
		t.Fatalf(`"0-99".Indices() = %d indices, %v; want all %d`, len(got), err, MaxGraphNodes)
	}
}

// TestNodeIndices_MatchesTheCRDPattern checks that what FormatNodeIndices writes passes the
// pattern the CRD validates with, and that the pattern refuses what Indices refuses for its
// shape: the API server must accept every status kdag writes.
func TestNodeIndices_MatchesTheCRDPattern(t *testing.T) {
	pattern := crdPattern(t)
	for _, indices := range [][]int32{nil, {0}, seq(0, 49), {2, 1}, {0, 2, 4, 6, 8, 10, 12, 14, 16, 18}, everyOther(99)} {
		s := FormatNodeIndices(indices)
		if !pattern.MatchString(string(s)) || len(s) > 512 {
			t.Errorf("%q (%d bytes) does not pass the CRD's pattern and maxLength 512", s, len(s))
		}
	}
	for _, bad := range []string{",", "1,", "a", "-1", "1-", " 1", "1;2"} {
		if pattern.MatchString(bad) {
			t.Errorf("the CRD's pattern accepts %q", bad)
		}
	}
}

// crdPattern reads NodeIndices' pattern from its marker in indices.go, which controller-gen
// copies into the CRDs.
func crdPattern(t *testing.T) *regexp.Regexp {
	t.Helper()
	src, err := os.ReadFile("indices.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(src), "// +kubebuilder:validation:Pattern=`")
	if !ok {
		t.Fatal("indices.go has no Pattern marker")
	}
	p, _, _ := strings.Cut(rest, "`")
	return regexp.MustCompile(p)
}

func seq(a, b int32) []int32 {
	var out []int32
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

// everyOther is 0, 2, 4, ... up to n: the longest string a listed graph's node can have.
func everyOther(n int32) []int32 {
	var out []int32
	for i := int32(0); i <= n; i += 2 {
		out = append(out, i)
	}
	return out
}

func FuzzNodeIndices(f *testing.F) {
	for _, s := range []string{"", "0", "0-49", "2,1", "0-2,5,7-9", "3-1", "0-2147483647", ",,", "1-2-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		indices, err := NodeIndices(s).Indices()
		if err != nil {
			return
		}
		if len(indices) > MaxGraphNodes {
			t.Fatalf("%q expands to %d indices", s, len(indices))
		}
		// What reads also writes back to indices that read the same.
		again, err := FormatNodeIndices(indices).Indices()
		if err != nil || !slices.Equal(again, indices) {
			t.Fatalf("%q: %v, written back and read %v, %v", s, indices, again, err)
		}
	})
}
