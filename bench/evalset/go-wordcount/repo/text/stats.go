package text

// Stats of a document.
type Stats struct {
	Words   int
	Longest string
}

// Analyze is the document's word count and its longest word.
func Analyze(doc string) Stats {
	st := Stats{Words: Count(doc)}
	for _, w := range Words(doc) {
		if len(w) > len(st.Longest) {
			st.Longest = w
		}
	}
	return st
}
