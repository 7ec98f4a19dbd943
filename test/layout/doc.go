// Package layout holds no code, only a test: the import rules of
// shared/DESIGN.md ("nevers"), checked on every non-test Go file of the
// module, whatever its build constraints, so that they hold mechanically.
package layout
