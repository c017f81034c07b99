// Package gen generates the JSON Schemas of package schema from manifest's
// Go types and doc comments, with github.com/invopop/jsonschema (and,
// through it, go/parser). It runs at build time only: `go generate
// ./schema` writes the files that package schema embeds, and schema's test
// generates them again in memory to find them stale. Nothing tend links
// imports it, so the binary carries neither the reflector nor the parser.
package gen
