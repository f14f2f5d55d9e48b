# cuOccupancyMaxActiveClusters for a cubin's kernel k0_MatMul (dynamic smem SMEM, 384 threads)
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
def ck(r, what):
    if r: raise SystemExit(f"{what}: CUresult {r}")
ck(cu.cuInit(0), "cuInit")
dev = ctypes.c_int(); ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "dev")
ctx = ctypes.c_void_p(); ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "ctx"); ck(cu.cuCtxSetCurrent(ctx), "cur")
class Attr(ctypes.Structure): _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint), ("rest", ctypes.c_char * 52)]
class Cfg(ctypes.Structure): _fields_ = [("gx", ctypes.c_uint), ("gy", ctypes.c_uint), ("gz", ctypes.c_uint), ("bx", ctypes.c_uint), ("by", ctypes.c_uint), ("bz", ctypes.c_uint), ("smem", ctypes.c_uint), ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(Attr)), ("n", ctypes.c_uint)]
for path, smem in zip(sys.argv[1::2], sys.argv[2::2]):
    mod = ctypes.c_void_p(); ck(cu.cuModuleLoad(ctypes.byref(mod), path.encode()), "load " + path)
    f = ctypes.c_void_p(); ck(cu.cuModuleGetFunction(ctypes.byref(f), mod, b"k0_MatMul"), "fn")
    ck(cu.cuFuncSetAttribute(f, 8, int(smem)), "smem attr")
    for cl in (1, 2):
        a = Attr(); a.id = 4; a.x, a.y, a.z = cl, 1, 1
        c = Cfg(16 if cl > 1 else 16, 16, 1, 384, 1, 1, int(smem), None, ctypes.pointer(a), 1)
        n = ctypes.c_int(); r = cu.cuOccupancyMaxActiveClusters(ctypes.byref(n), f, ctypes.byref(c))
        print(f"{path} smem {smem} cluster {cl}: max active clusters {n.value} (CUresult {r})")
