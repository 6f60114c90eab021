package build

// Common flags of every target.
func common(verbose bool) []string {
	flags := make([]string, 0, 8)
	flags = append(flags, "-O2")
	if verbose {
		flags = append(flags, "-v")
	}
	return flags
}

// Commands is the command line of each target, in order.
func Commands(targets []string, verbose bool) [][]string {
	base := common(verbose)
	var out [][]string
	for _, t := range targets {
		out = append(out, WithFlags(base, "-o", t, t+".c"))
	}
	return out
}
