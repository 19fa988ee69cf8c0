par.mesh @mesh <["dp=2]>
