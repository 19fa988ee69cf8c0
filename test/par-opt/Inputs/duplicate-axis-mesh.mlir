par.mesh @mesh <["x"=2, "x"=4]>
