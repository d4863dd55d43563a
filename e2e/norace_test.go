//go:build !race

package e2e

// raceBuild reports whether this test binary was built with -race; TestMain then runs
// nothing (see there).
const raceBuild = false
