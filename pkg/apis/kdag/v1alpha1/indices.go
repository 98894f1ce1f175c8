package v1alpha1

import (
	"strconv"
	"strings"

	"github.com/pkg/errors"
)

// NodeIndices are indices into GraphSummary.Nodes written as one string in the Linux list
// format that cpusets use: comma-separated items, each an index or an ascending run of
// consecutive indices written first-last, as "0-49" or "3,5-7,1". The items keep the order of
// the indices they stand for; "" is no index. FormatNodeIndices writes one, Indices reads it.
//
// One string rather than a list of integers, because the API server spends its CPU per list
// element of a status (decoding, validation, conversion): a 100-node graph whose second
// layer waits for all 50 nodes of the first has 2,500 blockers, and as integers they more than
// doubled the time of the status write (issue 32; docs/benchmarks.md).
//
// +kubebuilder:validation:MaxLength=512
// +kubebuilder:validation:Pattern=`^([0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)?$`
type NodeIndices string

// maxIndices bounds what one NodeIndices may expand to, so that a corrupt or hostile status
// ("0-2147483647") cannot make a reader allocate gigabytes: no node of a listed graph has more
// blockers than the graph has nodes.
const maxIndices = MaxGraphNodes

// FormatNodeIndices writes indices in the list format: each run of two or more consecutive
// ascending indices as first-last, the others one by one, in their order. Nil or empty gives "".
func FormatNodeIndices(indices []int32) NodeIndices {
	var b strings.Builder
	for i := 0; i < len(indices); {
		j := i
		for j+1 < len(indices) && indices[j+1] == indices[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(int64(indices[i]), 10))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.FormatInt(int64(indices[j]), 10))
		}
		i = j + 1
	}
	return NodeIndices(b.String())
}

// Indices reads the list format FormatNodeIndices writes, in order. It returns nil for "", and
// an error naming the item for anything else that is not comma-separated non-negative int32
// indices and ascending first-last runs, or that expands to more than MaxGraphNodes indices.
// The CRD's pattern refuses most such strings; a reader still checks, as a status can be written
// by anyone allowed to.
func (x NodeIndices) Indices() ([]int32, error) {
	if x == "" {
		return nil, nil
	}
	var out []int32
	for item := range strings.SplitSeq(string(x), ",") {
		first, last, isRun := strings.Cut(item, "-")
		a, err := parseIndex(first)
		if err != nil {
			return nil, errors.Wrapf(err, "node indices %q: item %q", string(x), item)
		}
		b := a
		if isRun {
			if b, err = parseIndex(last); err != nil {
				return nil, errors.Wrapf(err, "node indices %q: item %q", string(x), item)
			}
			if b <= a {
				return nil, errors.Errorf("node indices %q: item %q: a run must go from a smaller index to a larger one", string(x), item)
			}
		}
		if int64(len(out))+int64(b)-int64(a)+1 > maxIndices {
			return nil, errors.Errorf("node indices %q: more than %d indices", string(x), maxIndices)
		}
		for i := int64(a); i <= int64(b); i++ { // int64: b may be the largest int32
			out = append(out, int32(i))
		}
	}
	return out, nil
}

// parseIndex reads one non-negative decimal int32 made of digits only.
func parseIndex(s string) (int32, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not a non-negative integer")
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, errors.New("not an int32 index")
	}
	return int32(n), nil
}
