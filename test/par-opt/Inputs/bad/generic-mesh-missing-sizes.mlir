"par.mesh"() <{sym_name = "mesh", axis_names = ["dp"]}> : () -> ()
