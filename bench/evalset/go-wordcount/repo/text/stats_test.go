package text

import "testing"

func TestAnalyze(t *testing.T) {
	cases := []struct {
		doc   string
		words int
		long  string
	}{
		{"the quick brown fox", 4, "quick"},
		{"", 0, ""},
		{"one  two   three", 3, "three"},
	}
	for _, c := range cases {
		st := Analyze(c.doc)
		if st.Words != c.words || st.Longest != c.long {
			t.Errorf("Analyze(%q) = %+v, want %d words, longest %q", c.doc, st, c.words, c.long)
		}
	}
}
