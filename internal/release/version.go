package release

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/pkg/errors"
)

// DevVersion is the operator version of a build that no tag reaches: the Makefile's VERSION when
// `git describe --tags` finds no tag, and the version of the chart and manifests in the repository
// (charts/kdag appVersion, config/manager image tag).
const DevVersion = "dev"

// semver matches a Semantic Versioning 2.0.0 version (the regular expression semver.org gives)
// with an optional leading "v"; its groups are major, minor, patch, pre-release and build.
const semver = `^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`

// describe matches `git describe --tags --dirty` output: the tag, then, when the commit is past
// it, the number of commits and the abbreviated hash, then "-dirty" for uncommitted changes.
const describe = `^(.+?)(?:-(\d+)-g([0-9a-f]+))?(-dirty)?$`

// CheckVersion returns an error when version cannot be the image tag: empty, or more than 128
// characters, or characters outside [A-Za-z0-9_.-], or a leading '.' or '-'.
func CheckVersion(version string) error {
	// The tag grammar of the OCI distribution spec.
	if !regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`).MatchString(version) {
		return errors.Errorf("version %q: not a valid image tag (want `git describe --tags` output or %q)", version, DevVersion)
	}
	return nil
}

// ChartVersion returns the chart version, which Helm requires to be SemVer 2, for the operator
// version (`git describe --tags --dirty` output or DevVersion) built from commit revision (may be
// empty). It orders as the commits do, as Go's pseudo-versions:
//
//	v1.2.3                    1.2.3
//	v1.2.3-rc.1               1.2.3-rc.1
//	v1.2.3-4-gabc1234         1.2.4-0.4.gabc1234     (after 1.2.3, before 1.2.4)
//	v1.2.3-rc.1-4-gabc1234    1.2.3-rc.1.0.4.gabc1234
//	v1.2.3-dirty              1.2.3+dirty
//	dev                       0.0.0-dev+abc1234      (0.0.0-dev without a revision)
//
// Any other version (a tag that is not SemVer) becomes 0.0.0-<version>+<revision> with every run of
// characters other than [0-9A-Za-z-] replaced by '-'.
func ChartVersion(version, revision string) string {
	d := regexp.MustCompile(describe).FindStringSubmatch(version)
	tag, commits, hash, dirty := d[1], d[2], d[3], d[4] != ""
	s := regexp.MustCompile(semver).FindStringSubmatch(tag)
	if s == nil || s[5] != "" {
		id := regexp.MustCompile(`[^0-9A-Za-z-]+`).ReplaceAllString(version, "-")
		if strings.Trim(id, "0123456789") == "" {
			id = "v" + id // a numeric identifier must not start with 0
		}
		out := "0.0.0-" + id
		if len(revision) >= 7 {
			out += "+" + revision[:7]
		}
		return out
	}
	major, minor, patch, pre := s[1], s[2], s[3], s[4]
	if commits != "" {
		if pre == "" {
			p, _ := strconv.Atoi(patch)
			patch, pre = strconv.Itoa(p+1), "0"
		} else {
			pre += ".0"
		}
		pre += "." + commits + ".g" + hash
	}
	out := major + "." + minor + "." + patch
	if pre != "" {
		out += "-" + pre
	}
	if dirty {
		out += "+dirty"
	}
	return out
}

// BuildInfo is what a build is made from and stamped with: the version, the commit, the time.
type BuildInfo struct {
	// Version is the operator version (`git describe --tags --dirty`, or DevVersion): stamped
	// into the binaries, the image tag and version label, the chart's appVersion. Required
	// (CheckVersion).
	Version string
	// Revision is the commit: the image's revision label, and part of a dev chart's version
	// (ChartVersion). Empty leaves it out.
	Revision string
	// Created is the time written into the images (config, labels, history, file times) and the
	// chart package (file times): the commit's time in the Makefile (SOURCE_DATE_EPOCH). The zero
	// value means the Unix epoch. Builds of the same commit are byte-identical.
	Created time.Time
}

func (o BuildInfo) created() time.Time {
	if o.Created.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return o.Created.UTC()
}

// Tag returns the image reference ImageRepository:Version, or an error when Version is not a
// valid tag.
func (o BuildInfo) Tag() (name.Tag, error) {
	if err := CheckVersion(o.Version); err != nil {
		return name.Tag{}, err
	}
	tag, err := name.NewTag(ImageRepository+":"+o.Version, name.StrictValidation)
	return tag, errors.Wrapf(err, "image tag for version %s", o.Version)
}
