package text

import "testing"

func TestWordsAnyWhitespace(t *testing.T) {
	got := Words("a\tb\nc  d")
	if len(got) != 4 || got[0] != "a" || got[3] != "d" {
		t.Errorf("Words = %q, want [a b c d]", got)
	}
	if n := Count(" \t\n"); n != 0 {
		t.Errorf("Count(blank) = %d", n)
	}
}
