package feature

import (
	"errors"
	"strings"
	"testing"
)

// The error names the feature and its tag, in the words DESIGN.md's
// "Build tags" gives; a hook found unset in a build with its feature
// names the package to import.
func TestOmitted(t *testing.T) {
	for _, f := range All() {
		t.Run(f.Name, func(t *testing.T) {
			err := f.Omitted()
			if want := "this tend was built without " + f.Name + " (tag " + f.Tag + ")"; err.Error() != want {
				t.Errorf("Omitted() = %q, want %q", err, want)
			}
			if !errors.Is(err, ErrOmitted) {
				t.Error("Omitted() does not wrap ErrOmitted")
			}
			if f.Tag != "tend_omit_"+f.Name || !strings.HasPrefix(f.Package, "github.com/tend-dev/tend/") {
				t.Errorf("%+v: the tag is tend_omit_NAME and the package tend's", f)
			}
			switch err := f.Unregistered(); {
			case f.Linked && (f.Check() != nil || !strings.Contains(err.Error(), "import \""+f.Package+"\"")):
				t.Errorf("in a build with %s: Check() = %v, Unregistered() = %v", f.Name, f.Check(), err)
			case !f.Linked && (!errors.Is(f.Check(), ErrOmitted) || !errors.Is(err, ErrOmitted)):
				t.Errorf("in a build without %s: Check() = %v, Unregistered() = %v", f.Name, f.Check(), err)
			}
		})
	}
}
