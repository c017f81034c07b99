package diff

import (
	"fmt"
	"strings"
)

// nothing is what a device that renders to nothing lacks.
const nothing = "no models, files or services"

// emptyHint says what to check about n devices that render to nothing:
// the source paths, when only the devices' folders were read (a fleet of
// profiles whose CI job reads no profiles), or else the labels the
// profiles select by.
func emptyHint(opts Options, n int) string {
	their, agents := pick(n, "its", "their"), pick(n, "its agent reads", "the agents read")
	src, err := parseSources(opts)
	if err == nil && !src.several() && strings.Trim(src.device.raw, "/.") != "" {
		return fmt.Sprintf("only %s was read: if profiles declare %s resources, give every source path %s (source.paths), e.g. --path profiles --path '%s'",
			src.device.raw, their, agents, src.device.raw)
	}
	return fmt.Sprintf("no profile declares anything for %s: check %s labels against the profiles' selectors", pick(n, "it", "them"), their)
}

// Warnings are what the diff found worth a look that is no error: the
// devices that render to nothing at head.
func (r *Result) Warnings() []string {
	if len(r.Empty) == 0 {
		return nil
	}
	n := len(r.Empty)
	names := r.Empty
	if n > maxEmptyNames {
		names = append(names[:maxEmptyNames:maxEmptyNames], fmt.Sprintf("… and %d more", n-maxEmptyNames))
	}
	return []string{fmt.Sprintf("%s at %s (%s): %s; %s.", pick(n, "1 device renders to nothing", fmt.Sprintf("%d devices render to nothing", n)),
		r.Head.Name, nothing, strings.Join(names, ", "), emptyHint(r.paths, n))}
}

// maxEmptyNames bounds the devices a warning names.
const maxEmptyNames = 20

// emptyWarning is the warning of Validate about a device that renders to
// nothing.
func emptyWarning(opts Options) string {
	return "renders to nothing (" + nothing + "); " + emptyHint(opts, 1)
}
