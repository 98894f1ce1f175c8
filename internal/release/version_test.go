package release

import (
	"regexp"
	"strings"
	"testing"
)

func TestChartVersion(t *testing.T) {
	const rev = "abc1234def5678"
	for _, tc := range []struct {
		version, revision, want string
	}{
		{"v1.2.3", rev, "1.2.3"},
		{"1.2.3", rev, "1.2.3"},
		{"v1.2.3-rc.1", rev, "1.2.3-rc.1"},
		{"v1.2.3-4-gabc1234", rev, "1.2.4-0.4.gabc1234"},
		{"v1.2.3-rc.1-4-gabc1234", rev, "1.2.3-rc.1.0.4.gabc1234"},
		{"v1.2.3-dirty", rev, "1.2.3+dirty"},
		{"v1.2.3-12-g0123abc-dirty", rev, "1.2.4-0.12.g0123abc+dirty"},
		{"v0.9.19-1-gfff0000", "", "0.9.20-0.1.gfff0000"},
		{DevVersion, rev, "0.0.0-dev+abc1234"},
		{DevVersion, "", "0.0.0-dev"},
		{"release_2026.1", rev, "0.0.0-release-2026-1+abc1234"},
		{"v1.2", "", "0.0.0-v1-2"},
		{"007", "", "0.0.0-v007"},
	} {
		t.Run(tc.version+"@"+tc.revision, func(t *testing.T) {
			got := ChartVersion(tc.version, tc.revision)
			if got != tc.want {
				t.Errorf("ChartVersion(%q, %q) = %q, want %q", tc.version, tc.revision, got, tc.want)
			}
			if !regexp.MustCompile(semver).MatchString(got) || strings.HasPrefix(got, "v") {
				t.Errorf("ChartVersion(%q, %q) = %q: not SemVer 2", tc.version, tc.revision, got)
			}
		})
	}
}

// TestChartVersion_Order checks that chart versions order as the commits they come from.
func TestChartVersion_Order(t *testing.T) {
	// In commit order: each a later commit than the one before.
	versions := []string{"v1.2.3-rc.1", "v1.2.3-rc.1-2-gabc1234", "v1.2.3", "v1.2.3-1-gabc1234", "v1.2.3-10-gabc1234", "v1.2.4"}
	for i := 1; i < len(versions); i++ {
		a, b := ChartVersion(versions[i-1], ""), ChartVersion(versions[i], "")
		if compareSemver(a, b) >= 0 {
			t.Errorf("chart version of %s (%s) does not order before that of %s (%s)", versions[i-1], a, versions[i], b)
		}
	}
}

// compareSemver compares two SemVer 2 versions without build metadata by precedence (semver.org
// item 11): -1, 0 or 1.
func compareSemver(a, b string) int {
	pa, pb := regexp.MustCompile(semver).FindStringSubmatch(a), regexp.MustCompile(semver).FindStringSubmatch(b)
	for i := 1; i <= 3; i++ {
		if c := compareIdentifier(pa[i], pb[i]); c != 0 {
			return c
		}
	}
	switch {
	case pa[4] == pb[4]:
		return 0
	case pa[4] == "":
		return 1
	case pb[4] == "":
		return -1
	}
	ia, ib := strings.Split(pa[4], "."), strings.Split(pb[4], ".")
	for i := 0; i < len(ia) && i < len(ib); i++ {
		if c := compareIdentifier(ia[i], ib[i]); c != 0 {
			return c
		}
	}
	return compareInt(len(ia), len(ib))
}

func compareIdentifier(a, b string) int {
	numeric := regexp.MustCompile(`^\d+$`)
	switch na, nb := numeric.MatchString(a), numeric.MatchString(b); {
	case na && nb:
		if c := compareInt(len(a), len(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	case na:
		return -1
	case nb:
		return 1
	}
	return strings.Compare(a, b)
}

func compareInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestCheckVersion(t *testing.T) {
	for version, valid := range map[string]bool{
		"v1.2.3":                   true,
		"v1.2.3-4-gabc1234-dirty":  true,
		DevVersion:                 true,
		"":                         false,
		"v1.2.3+build":             false, // '+' is not allowed in an image tag
		"-v1":                      false,
		"has space":                false,
		strings.Repeat("a", 128):   true,
		strings.Repeat("a", 129):   false,
		"feature/branch-something": false,
	} {
		if err := CheckVersion(version); (err == nil) != valid {
			t.Errorf("CheckVersion(%q) = %v, want valid %v", version, err, valid)
		}
	}
}
