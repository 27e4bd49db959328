# Rewrites the relative `._ods_common` import of mlir-tblgen's Python output to
# the upstream package, since braze's op classes live outside `mlir.dialects`.
file(READ "${IN}" content)
string(REPLACE "from ._ods_common import" "from mlir.dialects._ods_common import"
       content "${content}")
file(WRITE "${OUT}" "${content}")
