package manifest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// expander replaces ${var:NAME}, ${device} and ${label:KEY} in the merged
// resources; other references (${model:…}, ${file:…}, ${replica}) are left
// for render and the service driver.
type expander struct {
	device string
	labels map[string]string
	vars   map[string]entry
	value  map[string]expansion // a variable's value, expanded
	loops  map[string]bool      // variables in a loop (reported once, at the variable)
	errs   *Errors
	total  int  // bytes of every expanded field so far
	over   bool // total went over MaxExpandedDeviceBytes (reported once)
	// loose, when set, checks a profile on its own, for no device: the
	// device's name, its labels and the variables only other profiles
	// set are not known, and are left as they are.
	loose *looseRefs
	// warnings are the references left as they are that look like a
	// mistyped expansion, at the field or variable that holds them.
	warnings []*Error
	// skip are the fields (origin field and path) that hold a reference
	// loose left unknown, or one in error: checking them would check a
	// placeholder, or say the error again.
	skip map[string]bool
}

// looseRefs is what a profile checked on its own may use without
// knowing its value.
type looseRefs struct {
	others map[string]bool // variables other profiles of the files set
}

// expansion is a string with its references expanded.
type expansion struct {
	out     string
	probs   []string // what is undefined, or too large: errors
	unknown []string // ${…} left as they are that look like a mistyped expansion
	loose   bool     // holds a reference left unknown (see expander.loose)
}

// Budgets of expansion: a variable used twice in each of its neighbours
// doubles at every level, so a 1 KB profile could ask for gigabytes.
const (
	// MaxExpandedBytes bounds one string (a variable's value or a field)
	// with every variable in it expanded: a manifest file's own limit.
	MaxExpandedBytes = MaxFileBytes
	// MaxExpandedDeviceBytes bounds every expanded field of one device.
	MaxExpandedDeviceBytes = 32 << 20

	expandsTo       = "expands to more than "
	maxExpandedText = "1 MiB"
	maxDeviceText   = "32 MiB"
)

func newExpander(device string, labels map[string]string, vars map[string]entry) *expander {
	x := &expander{device: device, labels: labels, vars: vars, value: map[string]expansion{},
		loops: map[string]bool{}, errs: &Errors{}, skip: map[string]bool{}}
	x.findLoops()
	return x
}

// findLoops reports every loop of variables once, at its first variable
// by name.
func (x *expander) findLoops() {
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var visit func(name string, path []string)
	visit = func(name string, path []string) {
		switch state[name] {
		case done:
			return
		case visiting:
			loop := append(slices.Clone(path[slices.Index(path, name):]), name)
			start := loop[:len(loop)-1]
			first := slices.Index(start, slices.Min(start))
			loop = append(append(slices.Clone(start[first:]), start[:first]...), start[first])
			for _, v := range start {
				x.loops[v] = true
			}
			e := x.vars[loop[0]]
			x.errs.add(e.origin.File, e.origin.Line(""), e.origin.Field,
				"variables refer to each other in a loop: %s; break the loop", strings.Join(loop, " → "))
			return
		}
		state[name] = visiting
		for _, ref := range varRefs(x.vars[name].value.(string)) {
			if _, ok := x.vars[ref]; ok {
				visit(ref, append(path, name))
			}
		}
		state[name] = done
	}
	for _, name := range sortedKeys(x.vars) {
		visit(name, nil)
	}
}

// escaped is what "$${" reads as while a string is expanded: "$${" is a
// literal "${" (a shell's ${HOME:-x} in a file, say), never a reference.
const escaped = "\x00tend-escaped\x00{"

func varRefs(s string) []string {
	var out []string
	for _, m := range reference().FindAllStringSubmatch(strings.ReplaceAll(s, "$${", escaped), -1) {
		if name, ok := strings.CutPrefix(m[1], "var:"); ok {
			out = append(out, name)
		}
	}
	return out
}

// resolve returns the value of variable name with every variable, label
// and device in it expanded, and what in it is undefined. The references
// in it that look like a mistyped expansion are warned about once, at
// the variable.
func (x *expander) resolve(name string) expansion {
	if v, ok := x.value[name]; ok {
		return v
	}
	v := x.expand(x.vars[name].value.(string))
	x.value[name] = v
	if len(v.unknown) > 0 {
		o := x.vars[name].origin
		x.warnings = append(x.warnings, &Error{File: o.File, Line: o.Line(""), Field: o.Field,
			Msg: "var/" + name + ": " + x.unknownText(v.unknown)})
	}
	return v
}

// expand replaces the references to variables, labels and the device in
// s, and says which of them are undefined and which references it leaves
// look like a mistyped expansion.
func (x *expander) expand(s string) expansion {
	if !strings.Contains(s, "${") {
		return expansion{out: s}
	}
	var e expansion
	size, over := len(s), false
	// grow charges what a reference adds; past the budget the rest of s
	// expands to nothing, and the string is reported once.
	grow := func(m, v string) string {
		if over {
			return ""
		}
		if size += len(v) - len(m); size > MaxExpandedBytes {
			over = true
			e.probs = append(e.probs, fmt.Sprintf(expandsTo+"%s (variables used in variables multiply); "+
				"a string with every variable in it expanded is at most %s: put large content in a model artifact", maxExpandedText, maxExpandedText))
			return ""
		}
		return v
	}
	// unknown leaves m as it is, for a check on its own (x.loose).
	unknown := func(m string) string {
		e.loose = true
		return m
	}
	out := reference().ReplaceAllStringFunc(strings.ReplaceAll(s, "$${", escaped), func(m string) string {
		ref := m[2 : len(m)-1]
		kind, arg, _ := strings.Cut(ref, ":")
		switch {
		case kind == "var" && !varName().MatchString(arg):
			return m // not a variable's name (a shell's ${var:-x}): left as it is
		case ref == "device" && x.loose != nil:
			return unknown(m)
		case ref == "device":
			return grow(m, x.device)
		case kind == "label" && x.loose != nil:
			return unknown(m)
		case kind == "label":
			if v, ok := x.labels[arg]; ok {
				return grow(m, v)
			}
			e.probs = append(e.probs, fmt.Sprintf("${label:%s} is not defined: the device has no label %q%s; set it in the agent config's labels or the Device document",
				arg, arg, meant("label", arg, sortedKeys(x.labels))))
		case kind == "var":
			v, ok := x.vars[arg]
			if !ok && x.loose != nil && x.loose.others[arg] {
				return unknown(m)
			}
			if !ok && x.loose != nil {
				known := sortedKeys(x.loose.others)
				for k := range x.vars {
					known = append(known, k)
				}
				e.probs = append(e.probs, fmt.Sprintf("${var:%s} is not defined: no profile of the files given sets it%s; add it to a profile's vars",
					arg, meant("var", arg, known)))
				break
			}
			if !ok {
				e.probs = append(e.probs, fmt.Sprintf("${var:%s} is not defined: no profile that applies to this device sets it%s; add it to a profile's vars",
					arg, meant("var", arg, sortedKeys(x.vars))))
				break
			}
			if x.loops[arg] {
				break // reported at the variable
			}
			inner := x.resolve(arg)
			for _, p := range inner.probs {
				verb := "uses "
				if strings.HasPrefix(p, expandsTo) {
					verb = ""
				}
				if p := fmt.Sprintf("${var:%s} (%s:%d) %s%s", arg, v.from.File, v.from.Line, verb, p); !slices.Contains(e.probs, p) {
					e.probs = append(e.probs, p) // once, however often the variable is used
				}
			}
			if inner.loose {
				return unknown(m)
			}
			return grow(m, inner.out)
		case mistyped(ref) && !slices.Contains(e.unknown, m):
			e.unknown = append(e.unknown, m)
		}
		return m
	})
	if over {
		e.out = ""
		return e
	}
	e.out = strings.ReplaceAll(out, escaped, "${")
	return e
}

// meant suggests the one of known (variables or labels, as kind names
// them) that name, undefined, is likely a typo of: " (did you mean
// ${var:threshold}?)", or "". It names no list of what is defined, which
// differs from device to device: a profile's problem then reads the same
// on every device, and is printed once for them all.
func meant(kind, name string, known []string) string {
	best, bestDist := "", 0
	for _, k := range known {
		d := editDistance(strings.ToLower(name), strings.ToLower(k))
		if d <= max(1, len(name)/4) && (best == "" || d < bestDist || d == bestDist && k < best) {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean ${" + kind + ":" + best + "}?)"
}

// editDistance is the optimal string alignment distance between a and
// b, by bytes: insertions, deletions, substitutions and transpositions of
// neighbours (stie for site) cost 1.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// shellName is a name as a shell's ${NAME} writes it, with the dots a
// variable's name may hold.
var shellName = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// mistyped reports whether ref, the inside of a ${…} that tend leaves as
// it is, looks like a mistyped expansion rather than shell syntax: a bare
// name (${batch} for ${var:batch}) other than device and replica, or a
// name, a colon and a word that is not one of tend's kinds (${vars:batch},
// ${lable:site}). Shell syntax with an operator is left alone: ${x:-1},
// ${x-1}, ${#x}, ${x%.*}, ${x:1:2}, ${1}.
func mistyped(ref string) bool {
	kind, arg, colon := strings.Cut(ref, ":")
	if !shellName().MatchString(kind) {
		return false
	}
	if !colon {
		return kind != "device" && kind != "replica"
	}
	switch kind {
	case "var", "label", "model", "file":
		return false
	}
	return arg != "" && (arg[0] == '/' || arg[0] == '_' || unicode.IsLetter(rune(arg[0])))
}

// unknownText says what is wrong with refs, references left as they are
// that look like a mistyped expansion, and what was likely meant.
func (x *expander) unknownText(refs []string) string {
	var parts []string
	for _, m := range refs {
		ref := m[2 : len(m)-1]
		name := ref
		if _, arg, ok := strings.Cut(ref, ":"); ok {
			name = arg
		}
		_, isVar := x.vars[name]
		_, isLabel := x.labels[name]
		hint := ""
		switch {
		case isVar || x.loose != nil && x.loose.others[name]:
			hint = " (did you mean ${var:" + name + "}?)"
		case isLabel:
			hint = " (did you mean ${label:" + name + "}?)"
		}
		parts = append(parts, m+hint)
	}
	what := " is not an expansion tend knows: it is left as it is"
	if len(parts) > 1 {
		what = " are not expansions tend knows: they are left as they are"
	}
	return strings.Join(parts, ", ") + what + " (tend expands ${var:NAME}, ${device} and ${label:KEY}, " +
		"and in a service ${model:NAME}, ${file:PATH} and ${replica}); write $${…} for a literal ${…}"
}

// item returns a copy of a Model, File or Service value with every string
// field expanded; an undefined reference is an error at its field, naming
// the resource id, and a reference that looks like a mistyped expansion
// a warning there.
func (x *expander) item(id string, value any) any {
	v := reflect.ValueOf(value)
	o := v.FieldByName("Origin").Interface().(Origin)
	return rewrite(v, "", func(field, s string) string {
		e := x.expand(s)
		for _, p := range e.probs {
			x.errs.add(o.File, o.Line(field), o.Field+field, "%s: %s", id, p)
		}
		if len(e.unknown) > 0 {
			x.warnings = append(x.warnings, &Error{File: o.File, Line: o.Line(field), Field: o.Field + field, Msg: id + ": " + x.unknownText(e.unknown)})
		}
		if e.loose || len(e.probs) > 0 {
			x.skip[o.Field+field] = true
		}
		if x.total += len(e.out); x.total > MaxExpandedDeviceBytes && !x.over {
			x.over = true
			x.errs.add(o.File, o.Line(field), o.Field+field, "%s: the device's resources expand to more than %s in all; "+
				"put large content in a model artifact", id, maxDeviceText)
		}
		if x.over {
			return ""
		}
		return e.out
	}).Interface()
}

// rewrite returns a deep copy of v with fn applied to every string reached
// through exported JSON fields, slices, maps and pointers; path is the
// field path of v (".command[0]", ".env.LOG_LEVEL").
func rewrite(v reflect.Value, path string, fn func(path, s string) string) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(rewrite(v.Elem(), path, fn))
		return p
	case reflect.String:
		out := reflect.New(v.Type()).Elem()
		out.SetString(fn(path, v.String()))
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(rewrite(v.Index(i), fmt.Sprintf("%s[%d]", path, i), fn))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			out.SetMapIndex(k, rewrite(v.MapIndex(k), path+"."+k.String(), fn))
		}
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" || name == "" {
				continue
			}
			out.Field(i).Set(rewrite(v.Field(i), path+"."+name, fn))
		}
		return out
	}
	return v
}
