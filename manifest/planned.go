package manifest

import "fmt"

// plannedKinds says what each planned kind is for.
var plannedKinds = map[string]string{}

// plannedFields are fields of DESIGN.md that this tend does not read yet,
// by the Go type they belong to and their name, with what they are for.
var plannedFields = map[string]string{}

// kindError says why a document of kind is not read where want was expected.
func kindError(api, kind, want string) string {
	if what, ok := plannedKinds[kind]; ok && api == APIVersion {
		return fmt.Sprintf("kind: %s (%s) is planned and not supported by this tend yet; declare the resources in a %s document", kind, what, KindDevice)
	}
	return fmt.Sprintf("expected apiVersion: %s and kind: %s, got apiVersion: %q, kind: %q", APIVersion, want, api, kind)
}
