package manifest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSelectorMatches(t *testing.T) {
	labels := map[string]string{"hw": "orin", "site": "plant-a"}
	req := func(key, op string, values ...string) Selector {
		return Selector{MatchExpressions: []Requirement{{Key: key, Operator: op, Values: values}}}
	}
	tests := []struct {
		name string
		sel  Selector
		want bool
	}{
		{"empty selector matches every device", Selector{}, true},
		{"matchLabels equal", Selector{MatchLabels: map[string]string{"hw": "orin"}}, true},
		{"matchLabels all must hold", Selector{MatchLabels: map[string]string{"hw": "orin", "site": "plant-b"}}, false},
		{"matchLabels missing key", Selector{MatchLabels: map[string]string{"gpu": "yes"}}, false},
		{"In holds", req("site", OpIn, "plant-a", "plant-b"), true},
		{"In other value", req("site", OpIn, "plant-c"), false},
		{"In missing key", req("ring", OpIn, "canary"), false},
		{"NotIn holds", req("site", OpNotIn, "plant-c"), true},
		{"NotIn listed value", req("site", OpNotIn, "plant-a"), false},
		{"NotIn missing key matches", req("ring", OpNotIn, "canary"), true},
		{"Exists", req("hw", OpExists), true},
		{"Exists missing key", req("ring", OpExists), false},
		{"DoesNotExist", req("hw", OpDoesNotExist), false},
		{"DoesNotExist missing key", req("ring", OpDoesNotExist), true},
		{"labels and expressions both hold", Selector{MatchLabels: map[string]string{"hw": "orin"}, MatchExpressions: []Requirement{{Key: "ring", Operator: OpDoesNotExist}}}, true},
		{"labels hold but an expression does not", Selector{MatchLabels: map[string]string{"hw": "orin"}, MatchExpressions: []Requirement{{Key: "hw", Operator: OpNotIn, Values: []string{"orin"}}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.sel.Matches(labels))
		})
	}
	t.Run("no labels", func(t *testing.T) {
		require.True(t, Selector{}.Matches(nil))
		require.True(t, req("hw", OpNotIn, "orin").Matches(nil))
		require.False(t, req("hw", OpExists).Matches(nil))
	})
}

func TestBadProfile(t *testing.T) {
	head := "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: orin}\nspec:\n"
	tests := []struct{ name, doc, want string }{
		{"unknown operator", head + "  selector:\n    matchExpressions:\n      - {key: hw, operator: Has, values: [orin]}\n",
			`p.yaml:7: spec.selector.matchExpressions[0].operator: unknown operator "Has": use In, NotIn, Exists or DoesNotExist`},
		{"In without values", head + "  selector:\n    matchExpressions: [{key: hw, operator: In}]\n",
			`p.yaml:6: spec.selector.matchExpressions[0].values: In needs at least one value`},
		{"NotIn with empty values", head + "  selector:\n    matchExpressions: [{key: hw, operator: NotIn, values: []}]\n",
			`spec.selector.matchExpressions[0].values: NotIn needs at least one value`},
		{"Exists with values", head + "  selector:\n    matchExpressions: [{key: hw, operator: Exists, values: [a]}]\n",
			`spec.selector.matchExpressions[0].values: Exists takes no values: remove them`},
		{"missing key", head + "  selector:\n    matchExpressions: [{operator: DoesNotExist}]\n",
			`spec.selector.matchExpressions[0].key: missing`},
		{"missing selector", head + "  priority: 1\n", `p.yaml:4: spec.selector: missing: the devices this profile applies to`},
		{"missing name", "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {}\nspec: {selector: {}}\n", `p.yaml:1: metadata.name: missing: the name of the profile`},
		{"bad name", "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: Orin!}\nspec: {selector: {}}\n", `p.yaml:3: metadata.name: invalid name "Orin!"`},
		{"labels are not a profile's", "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: orin, labels: {a: b}}\nspec: {selector: {}}\n", `p.yaml:3: metadata: unknown field "labels"`},
		{"bad var name", head + "  selector: {}\n  vars: {\"a b\": x}\n", `p.yaml:6: spec.vars.a b: invalid variable name "a b"`},
		{"priority not an integer", head + "  selector: {}\n  priority: high\n", `p.yaml:6: spec.priority: must be an integer, got "high"`},
		{"same name twice", head + "  selector: {}\n---\n" + head + "  selector: {}\n", `p.yaml:9: metadata.name: profile/orin is declared twice (first at p.yaml:3)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadFleet([]Input{{Name: "p.yaml", Data: []byte(tt.doc)}})
			require.ErrorIs(t, err, ErrInvalid)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}
