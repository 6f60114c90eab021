// Package text counts words in documents.
package text

import "strings"

// Words splits s into its words (runs of non-space characters).
func Words(s string) []string {
	return strings.Split(strings.TrimSpace(s), " ")
}

// Count is the number of words in s.
func Count(s string) int {
	if strings.TrimSpace(s) == "" {
		return 0
	}
	return len(Words(s))
}
