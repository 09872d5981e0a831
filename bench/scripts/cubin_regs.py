#!/usr/bin/env python3
"""Registers, shared memory and stack per kernel of cubins (no GPU, no cuobjdump): reads the ELF
symbol table, the (symbol, value) attributes of .nv.info (EIATTR_REGCOUNT 0x2f, FRAME_SIZE 0x11,
MIN/MAX_STACK_SIZE 0x12/0x23) and each .nv.shared.<name> size.
Usage: cubin_regs.py CUBIN... [--grep SUBSTRING]  (cubins or the kernel cache's entries:
`MOETUNE_CACHE_DIR=D moetune kernels --compile-only --arch sm_90a`, then D/*.cubin)"""
import struct
import sys


def sections(data):
    shoff, = struct.unpack_from('<Q', data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', data, 0x3A)
    hdrs = [struct.unpack_from('<IIQQQQIIQQ', data, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx]
    def name(off, tab=strtab):
        end = data.index(b'\0', tab[4] + off)
        return data[tab[4] + off:end].decode()
    return [(name(h[0]), h) for h in hdrs]


def kernels(path):
    data = open(path, 'rb').read()
    data = data[data.index(b'\x7fELF'):]  # moetune's kernel cache puts a header before the ELF
    secs = sections(data)
    byname = {n: h for n, h in secs}
    symtab = byname['.symtab']
    strtab = byname['.strtab']
    syms = []
    for i in range(symtab[5] // 24):
        st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from(
            '<IBBHQQ', data, symtab[4] + i * 24)
        end = data.index(b'\0', strtab[4] + st_name)
        syms.append(data[strtab[4] + st_name:end].decode())
    out = {}
    def attrs(h):
        off, end = h[4], h[4] + h[5]
        while off < end:
            fmt, attr = data[off], data[off + 1]
            if fmt == 0x04:
                size, = struct.unpack_from('<H', data, off + 2)
                yield attr, data[off + 4:off + 4 + size]
                off += 4 + size
            elif fmt == 0x03:
                yield attr, data[off + 2:off + 4]
                off += 4
            elif fmt == 0x02:
                off += 3
            else:
                off += 2
    # (symbol, value) pairs in the global .nv.info: REGCOUNT 0x2f, FRAME_SIZE 0x11 (the stack
    # frame: spills and local arrays), MIN_STACK_SIZE 0x12, MAX_STACK_SIZE 0x23.
    keys = {0x2f: 'regs', 0x11: 'frame', 0x12: 'stack', 0x23: 'stack'}
    for attr, val in attrs(byname['.nv.info']):
        if attr in keys and len(val) == 8:
            sym, v = struct.unpack('<II', val)
            d = out.setdefault(syms[sym], {})
            d[keys[attr]] = max(v, d.get(keys[attr], 0))
    for n, h in secs:
        if n.startswith('.nv.shared.') and not n.startswith('.nv.shared.reserved'):
            out.setdefault(n[len('.nv.shared.'):], {})['smem'] = h[5]
    return out


def main():
    args = sys.argv[1:]
    pat = ''
    if '--grep' in args:
        i = args.index('--grep')
        pat = args[i + 1]
        del args[i:i + 2]
    for path in args:
        for k, v in sorted(kernels(path).items()):
            if pat in k and 'regs' in v:
                print(f"{v['regs']:4d} regs {v.get('frame', 0):5d} B frame {v.get('stack', 0):5d} B stack "
                      f"{v.get('smem', 0):6d} B smem  {k}")


if __name__ == '__main__':
    main()
