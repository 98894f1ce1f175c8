package render

import "testing"

func TestEscape(t *testing.T) {
	for _, tc := range []struct {
		name, in, dot, mermaid string
	}{
		{"plain", "Deployment default/web", "Deployment default/web", "Deployment default/web"},
		{"empty", "", "", ""},
		{"double quote", `app "v1"`, `app \"v1\"`, "app #quot;v1#quot;"},
		{"backslash", `a\b`, `a\\b`, `a\b`},
		{"newline", "a\nb", `a\nb`, "a<br/>b"},
		{"carriage return dropped", "a\r\nb", `a\nb`, "a<br/>b"},
		{"hash", "#d", "#d", "#35;d"},
		{"html", "<e> &f", "<e> &f", "#lt;e#gt; #amp;f"},
		{"entity-looking text", "#quot;", "#quot;", "#35;quot;"},
		{"dot escape-looking text", `\n`, `\\n`, `\n`},
		{"unicode", "café ✓", "café ✓", "café ✓"},
		{"everything", "a\\b \"c\"\n#d <e> &f", `a\\b \"c\"\n#d <e> &f`, `a\b #quot;c#quot;<br/>#35;d #lt;e#gt; #amp;f`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := escapeDOT(tc.in); got != tc.dot {
				t.Errorf("escapeDOT(%q) = %q, want %q", tc.in, got, tc.dot)
			}
			if got := escapeMermaid(tc.in); got != tc.mermaid {
				t.Errorf("escapeMermaid(%q) = %q, want %q", tc.in, got, tc.mermaid)
			}
		})
	}
}
