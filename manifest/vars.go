package manifest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// expander replaces ${var:NAME}, ${device} and ${label:KEY} in the merged
// resources; other references (${model:…}, ${file:…}, ${replica}) are left
// for render and the service driver.
type expander struct {
	device string
	labels map[string]string
	vars   map[string]entry
	value  map[string]string   // a resolved variable's value
	probs  map[string][]string // why a variable cannot be resolved
	loops  map[string]bool     // variables in a loop (reported once, at the variable)
	errs   *Errors
	total  int  // bytes of every expanded field so far
	over   bool // total went over MaxExpandedDeviceBytes (reported once)
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
	x := &expander{device: device, labels: labels, vars: vars, value: map[string]string{},
		probs: map[string][]string{}, loops: map[string]bool{}, errs: &Errors{}}
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
	for _, m := range reference.FindAllStringSubmatch(strings.ReplaceAll(s, "$${", escaped), -1) {
		if name, ok := strings.CutPrefix(m[1], "var:"); ok {
			out = append(out, name)
		}
	}
	return out
}

// resolve returns the value of variable name with every variable, label
// and device in it expanded, and what in it is undefined.
func (x *expander) resolve(name string) (string, []string) {
	if v, ok := x.value[name]; ok {
		return v, x.probs[name]
	}
	v, probs := x.expand(x.vars[name].value.(string))
	x.value[name], x.probs[name] = v, probs
	return v, probs
}

// expand replaces the references to variables, labels and the device in
// s, and says which of them are undefined.
func (x *expander) expand(s string) (string, []string) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var probs []string
	size, over := len(s), false
	// grow charges what a reference adds; past the budget the rest of s
	// expands to nothing, and the string is reported once.
	grow := func(m, v string) string {
		if over {
			return ""
		}
		if size += len(v) - len(m); size > MaxExpandedBytes {
			over = true
			probs = append(probs, fmt.Sprintf(expandsTo+"%s (variables used in variables multiply); "+
				"a string with every variable in it expanded is at most %s: put large content in a model artifact", maxExpandedText, maxExpandedText))
			return ""
		}
		return v
	}
	out := reference.ReplaceAllStringFunc(strings.ReplaceAll(s, "$${", escaped), func(m string) string {
		ref := m[2 : len(m)-1]
		kind, arg, _ := strings.Cut(ref, ":")
		switch {
		case kind == "var" && !varName.MatchString(arg):
			return m // not a variable's name (a shell's ${var:-x}): left as it is
		case ref == "device":
			return grow(m, x.device)
		case kind == "label":
			if v, ok := x.labels[arg]; ok {
				return grow(m, v)
			}
			probs = append(probs, fmt.Sprintf("${label:%s} is not defined: the device has no label %q (its labels: %s); set it in the agent config's labels or the Device document",
				arg, arg, strings.Join(sortedKeys(x.labels), ", ")))
		case kind == "var":
			e, ok := x.vars[arg]
			if !ok {
				probs = append(probs, fmt.Sprintf("${var:%s} is not defined: no profile that applies to this device sets it (vars: %s); add it to a profile's vars",
					arg, strings.Join(sortedKeys(x.vars), ", ")))
				break
			}
			if x.loops[arg] {
				break // reported at the variable
			}
			v, inner := x.resolve(arg)
			for _, p := range inner {
				verb := "uses "
				if strings.HasPrefix(p, expandsTo) {
					verb = ""
				}
				if p := fmt.Sprintf("${var:%s} (%s:%d) %s%s", arg, e.from.File, e.from.Line, verb, p); !slices.Contains(probs, p) {
					probs = append(probs, p) // once, however often the variable is used
				}
			}
			return grow(m, v)
		}
		return m
	})
	if over {
		return "", probs
	}
	return strings.ReplaceAll(out, escaped, "${"), probs
}

// item returns a copy of a Model, File or Service value with every string
// field expanded; an undefined reference is an error at its field, naming
// the resource id.
func (x *expander) item(id string, value any) any {
	v := reflect.ValueOf(value)
	o := v.FieldByName("Origin").Interface().(Origin)
	return rewrite(v, "", func(field, s string) string {
		out, probs := x.expand(s)
		for _, p := range probs {
			x.errs.add(o.File, o.Line(field), o.Field+field, "%s: %s", id, p)
		}
		if x.total += len(out); x.total > MaxExpandedDeviceBytes && !x.over {
			x.over = true
			x.errs.add(o.File, o.Line(field), o.Field+field, "%s: the device's resources expand to more than %s in all; "+
				"put large content in a model artifact", id, maxDeviceText)
		}
		if x.over {
			return ""
		}
		return out
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
