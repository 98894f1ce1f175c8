package observability

import (
	"bufio"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sample is one sample of the Prometheus text exposition format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

func (s sample) String() string {
	keys := slices.Sorted(maps.Keys(s.labels))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, s.labels[k]))
	}
	return fmt.Sprintf("%s{%s} %g", s.name, strings.Join(parts, ","), s.value)
}

// exposition is a parsed scrape: the samples and each metric family's # TYPE.
type exposition struct {
	samples []sample
	types   map[string]string
}

// parseExposition parses the Prometheus text format (version 0.0.4), which the manager's metrics
// endpoint serves to a client that asks for nothing else.
func parseExposition(text string) (*exposition, error) {
	e := &exposition{types: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			if f := strings.Fields(line); len(f) == 4 && f[1] == "TYPE" {
				e.types[f[2]] = f[3]
			}
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n, line, err)
		}
		e.samples = append(e.samples, s)
	}
	return e, sc.Err()
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, fmt.Errorf("no metric name")
	}
	s.name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, ", ")
			if strings.HasPrefix(line, "}") {
				line = line[1:]
				break
			}
			eq := strings.Index(line, "=\"")
			if eq <= 0 {
				return s, fmt.Errorf("malformed labels")
			}
			key := line[:eq]
			line = line[eq+2:]
			var value strings.Builder
			closed := false
			for j := 0; j < len(line); j++ {
				switch c := line[j]; {
				case c == '\\' && j+1 < len(line):
					j++
					switch line[j] {
					case 'n':
						value.WriteByte('\n')
					default:
						value.WriteByte(line[j])
					}
				case c == '"':
					line, closed = line[j+1:], true
				default:
					value.WriteByte(c)
				}
				if closed {
					break
				}
			}
			if !closed {
				return s, fmt.Errorf("unterminated label value")
			}
			s.labels[key] = value.String()
		}
	}
	f := strings.Fields(line)
	if len(f) == 0 || len(f) > 2 {
		return s, fmt.Errorf("want a value and an optional timestamp")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

// find returns the samples of name whose labels include every pair of want.
func (e *exposition) find(name string, want map[string]string) []sample {
	var out []sample
	for _, s := range e.samples {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range want {
			if s.labels[k] != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, s)
		}
	}
	return out
}

// sum adds the values of the samples find returns; ok is false when there are none.
func (e *exposition) sum(name string, want map[string]string) (total float64, ok bool) {
	found := e.find(name, want)
	for _, s := range found {
		total += s.value
	}
	return total, len(found) > 0
}

// names lists the distinct sample names with prefix, for failure messages.
func (e *exposition) names(prefix string) []string {
	var out []string
	for _, s := range e.samples {
		if strings.HasPrefix(s.name, prefix) && !slices.Contains(out, s.name) {
			out = append(out, s.name)
		}
	}
	return out
}

func TestParseExposition(t *testing.T) {
	e, err := parseExposition(`# HELP kdag_nodes_total Graph nodes processed.
# TYPE kdag_nodes_total counter
kdag_nodes_total{action="created",controller="gitea",outcome="Waiting"} 2
kdag_nodes_total{action="skipped",controller="gitea",outcome="Ready"} 7
kdag_node_duration_seconds_bucket{action="created",controller="gitea",kind="Valkey",le="+Inf"} 1
odd{a="x\"y\\z",b="line\nbreak"} NaN 1700000000000
up 1
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.types["kdag_nodes_total"]; got != "counter" {
		t.Errorf("type = %q", got)
	}
	if v, ok := e.sum("kdag_nodes_total", map[string]string{"controller": "gitea"}); !ok || v != 9 {
		t.Errorf("sum = %v, %v; want 9", v, ok)
	}
	if v, ok := e.sum("kdag_node_duration_seconds_bucket", map[string]string{"le": "+Inf", "kind": "Valkey"}); !ok || v != 1 {
		t.Errorf("bucket = %v, %v", v, ok)
	}
	odd := e.find("odd", nil)
	if len(odd) != 1 || odd[0].labels["a"] != `x"y\z` || odd[0].labels["b"] != "line\nbreak" {
		t.Errorf("escaped labels: %v", odd)
	}
	if len(e.find("up", nil)) != 1 {
		t.Error("sample without labels not parsed")
	}
	if _, err := parseExposition("broken{a=\"x} 1\n"); err == nil {
		t.Error("unterminated label value accepted")
	}
}
