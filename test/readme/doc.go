// Package readme holds no code, only tests that run the READMEs' recipes
// as a reader would: the shell blocks exactly as written, with bash, as
// root, in the namespaces the recipes create themselves, several times in
// a row, checking the counts they print against counters the programs do
// not keep (the senders' own counts, the interfaces' counters).
//
// TestQuickStart takes README.md's quick start program as it is, builds
// it with the quick start's own build block (a module of its own, with a
// replace directive pointing at this checkout, as the README tells a user
// to do) and runs the quick start's recipe; it also sends the program
// traffic from the kernel's UDP stack on a port it must leave to the
// kernel. TestExamplesRecipes runs examples/README.md's recipes from the
// repository's root, where they build the examples.
//
// The recipes' namespaces have fixed names (qa and qb, xa and xb): the
// tests refuse to run when one of them exists already, and delete them
// afterwards, also on failure. The tests add no sleeps of their own: a
// recipe must wait for its program's ready line by itself.
package readme
