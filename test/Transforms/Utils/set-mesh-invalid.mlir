// RUN: par-opt %s -split-input-file --par-set-mesh="mesh=dp=2,tp=4" -verify-diagnostics

// Two meshes: which one to override is ambiguous.
// expected-error @below {{--mesh cannot choose which of the module's 2 meshes to override: @a @b}}
module {
  par.mesh @a <["x"=2]>
  par.mesh @b <["y"=2]>
}

// -----

// Another symbol already called @mesh.
// expected-error @below {{--mesh would create @mesh, but another symbol already has that name}}
module {
  func.func @mesh() {
    return
  }
}
