# CPU model of the row load kinds of x_to_channels_last_kernel (csrc/kernels/conv1d_fwd_dense_tma.cu, session 18):
# a warp per row loads the 16-byte aligned chunks holding a tile's 256 positions (lane 31 one more) and shifts them
# into place with the next lane's chunk. kCopyRows loads whole chunks that hold any of the row's elements (it may
# read up to 7 elements past either end of the row, inside the same 16-byte block); kCopyRowsExact loads chunks
# that cross the row's ends element by element and reads nothing outside the row. Checks the tile rows against
# the row itself for lengths 1-2000 at every alignment, and where each kind reads. Keep it in step with the .cu.
# Run: python3 ci/emulate_copy_rows.py  (about 20 s)
import random


def tile_row(mem, rowstart, l0, L, exact):
    """Tile row (256 positions from l0) of the row at mem[rowstart : rowstart + L]; returns (tile, n, reads)."""
    n = min(L - l0, 256)
    addr = rowstart + l0  # element address of tile position 0
    d = addr % 8  # the row's offset from a 16-byte boundary, in elements
    base = addr - d  # chunk j holds tile positions 8j - d .. 8j - d + 7
    end = L - l0  # the row's positions are -l0 .. end - 1 from the tile start
    reads = []

    def chunk(j):
        reads.extend(range(base + 8 * j, base + 8 * j + 8))
        return mem[base + 8 * j: base + 8 * j + 8]

    def part(lo):  # row_part
        out = []
        for t in range(8):
            if -l0 <= lo + t < end:
                reads.append(addr + lo + t)
                out.append(mem[addr + lo + t])
            else:
                out.append(0)
        return out

    val = []
    for lane in range(32):
        lo = 8 * lane - d
        if lo >= n:
            val.append([0] * 8)
        elif not exact or (lo >= -l0 and lo + 8 <= end):
            val.append(chunk(lane))
        else:
            val.append(part(lo))
    extra = [0] * 8
    if d > 0 and 256 - d < n:
        extra = chunk(32) if not exact or 256 - d + 8 <= end else part(256 - d)
    tile = []
    for lane in range(32):  # shift_elements(val[lane], next lane's val, d)
        nxt = val[lane + 1] if lane < 31 else extra
        tile += (val[lane] + nxt)[d:d + 8]
    return tile, n, reads


def main():
    random.seed(3)
    tiles = 0
    for _ in range(6000):
        L = random.choice([1, 2, 7, 8, 9, 255, 256, 257, 300, 511, 512, 513, 1001, random.randint(1, 2000)])
        rowstart = 32 + random.randint(0, 15)
        mem = [random.randint(1, 60000) for _ in range(rowstart + L + 40)]
        for l0 in range(0, L, 256):
            for exact in (False, True):
                tile, n, reads = tile_row(mem, rowstart, l0, L, exact)
                assert tile[:n] == mem[rowstart + l0: rowstart + l0 + n], (L, rowstart, l0, exact)
                lo_block, hi_block = rowstart // 8 * 8, (rowstart + L + 7) // 8 * 8
                assert all(lo_block <= r < hi_block for r in reads), "a read outside the row's 16-byte blocks"
                if exact:
                    assert all(rowstart <= r < rowstart + L for r in reads), "kCopyRowsExact read outside the row"
            tiles += 1
    print(f"ok: {tiles} tiles, both kinds match the row; kCopyRowsExact reads only the row")


if __name__ == "__main__":
    main()
