//go:build !tend_omit_notation

package feature

const notation = true
