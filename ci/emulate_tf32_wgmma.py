# CPU model of ci/tf32_wgmma_proto.cu (TF32 dense conv1d forward on wgmma m64n128k8, written without a GPU).
# Ports make_plan, pack_kernel, issue_a, issue_raw (16-byte `vec` path and element path), the stage cursor,
# transpose, the wgmma descriptors (built with smem_desc's encoding, decoded as the PTX ISA reads a no-swizzle
# K-major operand: element (r, kk) at start + (r/8)*SBO + (r%8)*16 + (kk/4)*LBO + (kk%4)*4), the accumulator
# fragment layout (PTX ISA m64nNk8 D: d[4i+2h+c] = row 16*(warp%4) + lane/4 + 8h, col 8i + 2*(lane%4) + c) and
# the epilogue, over a byte-exact shared-memory image, in the kernel's program order (persistent blocks, three-deep
# rings, cp.async commit groups, wgmma commit/wait groups, barriers as epochs). Checks:
#   * y against a direct conv1d on integer data (exact; TF32 holds small integers) and on random floats
#     (against a direct conv of the TF32-rounded operands, fp64);
#   * every y element written exactly once, no write outside y's logical extent;
#   * every global read inside x's logical extent (and 16-byte cp.async sources 16-byte aligned);
#   * every shared word a wgmma or the transpose reads holds data of the stage that reads it (no stale / unlanded
#     data), written (cp.async retired, st.shared done) and fenced (fence.proxy.async) in an epoch before the read;
#   * no shared write (cp.async issue, st.shared) while a wgmma group that reads the word may be in flight, nor by
#     the other warpgroup in the epoch of the wait that retired it, nor in the epoch of another thread's read (WAR);
#   * every shared access inside smem_bytes, with the alignment its instruction needs.
# cp.async data can land at issue or at the wait that retires it, and a wgmma group can read at issue or at the
# wait that retires it: all four combinations are run (modes). Run: python3 ci/emulate_tf32_wgmma.py [CASE]
# (about 1.5 minutes; all cases pass for the .cu as written), and python3 ci/emulate_tf32_wgmma.py --selftest
# (deliberate bugs must be caught).
# It checks the index math and ordering as ported by hand, not the PTX: keep it in step with the .cu.
import sys

import numpy as np

SMEM_OPTIN = 232448  # H100 / H200 opt-in bytes per block
kThreads, kBM, kBN, kCC, kMaxK, kRing = 256, 128, 128, 16, 8, 3
NAN_WORD = np.uint32(0x7FFFFFFF)


def cdiv(a, b):
    return -(-a // b)


def tf32_bits(v):  # tf32_round_bits on a float32 array -> uint32 array
    b = np.asarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (b & 0x7FFFFFFF) > 0x7F800000
    r = ((b + 0x1000) & 0xFFFFE000) & 0xFFFFFFFF
    return np.where(nan, 0x7FFFFFFF, r).astype(np.uint32)


def tf32_val(v):
    return tf32_bits(v).view(np.float32)


# ---- host: make_plan ---------------------------------------------------------------------------------------
def make_plan(p):
    if p['K'] < 1 or p['K'] > kMaxK or p['S'] < 1 or p['S'] > 8 or p['D'] < 1:
        return None
    q = dict(cin_g=p['Cin'] // p['G'], cout_g=p['Cout'] // p['G'], k=p['K'], s=p['S'], d=p['D'])
    span = (kBN - 1) * q['s'] + (q['k'] - 1) * q['d'] + 1
    if span > 2048:
        return None
    q['span'] = span
    q['vec'] = int(p['xsl'] == 1 and p['x_ptr'] % 4 == 0)  # each row realigned by itself
    q['wr'] = ((3 if q['vec'] else 0) + span + 3) // 4 * 4
    q['span8'] = (span + 7) // 8 * 8
    wq0 = (span + q['s'] - 1) // q['s']
    q['wq'] = wq0
    for wq in range(wq0, wq0 + 8):
        used = [False] * 8
        ok = True
        for t in range(8):
            r = ((t % q['s']) * wq + t // q['s']) & 7
            ok = ok and not used[r]
            used[r] = True
        if ok:
            q['wq'] = wq
            break
    q['a_floats'] = q['k'] * kCC * kBM
    q['b_bytes'] = 4 * q['s'] * q['wq'] * 16
    q['ab_bytes'] = q['a_floats'] * 4 + q['b_bytes']
    q['raw_bytes'] = kCC * q['wr'] * 4
    q['smem_bytes'] = kRing * (q['ab_bytes'] + q['raw_bytes'] + kCC * 4)  # + each ring slot's 16 row leads
    if q['smem_bytes'] > SMEM_OPTIN:
        return None
    q['chunks'] = cdiv(q['cin_g'], kCC)
    q['m_tiles'] = cdiv(q['cout_g'], kBM)
    q['j_tiles'] = cdiv(p['Lout'], kBN)
    q['num_tiles'] = p['B'] * q['j_tiles'] * p['G'] * q['m_tiles']
    return q


# ---- pack_kernel ---------------------------------------------------------------------------------------------
def pack(p, q, wmem):
    total = p['G'] * q['m_tiles'] * q['chunks'] * q['a_floats']
    idx = np.arange(total, dtype=np.int64)
    blk, e = np.divmod(idx, q['a_floats'])
    blk, ch = np.divmod(blk, q['chunks'])
    g, mt = np.divmod(blk, q['m_tiles'])
    f = e & 3
    row = (e >> 2) & 127
    kc = e >> 9
    k, cg = kc >> 2, kc & 3
    co = mt * kBM + row
    ci = ch * kCC + cg * 4 + f
    ok = (co < q['cout_g']) & (ci < q['cin_g'])
    widx = (g * q['cout_g'] + co) * p['wso'] + ci * p['wsi'] + k * p['wsk']
    v = np.zeros(total, np.float32)
    v[ok] = wmem[widx[ok]]
    return tf32_bits(v)  # packed words


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


# ---- the kernel, one block ---------------------------------------------------------------------------------
class Block:
    def __init__(self, p, q, wpack, xmem, ymem, ycount, bx, grid, cp_late, mma_late, mut=None):
        self.mut = mut  # a deliberate bug (self test), or None
        self.p, self.q, self.wpack, self.xmem, self.ymem, self.ycount = p, q, wpack, xmem, ymem, ycount
        self.bx, self.grid, self.cp_late, self.mma_late = bx, grid, cp_late, mma_late
        nw = q['smem_bytes'] // 4
        self.nw = nw
        self.val = np.full(nw, NAN_WORD, np.uint32)   # shared memory words
        self.tag = np.full(nw, -1, np.int64)          # stage whose data the word holds
        self.w_issue = np.full(nw, -10, np.int64)     # epoch of the write's issue
        self.w_retire = np.full(nw, -10, np.int64)    # epoch of its completion (cp.async wait / st.shared)
        self.w_fenced = np.ones(nw, bool)             # fence.proxy.async after completion
        self.w_thread = np.full(nw, -1, np.int64)
        self.r_epoch = np.full(nw, -10, np.int64)     # last generic read
        self.r_thread = np.full(nw, -1, np.int64)
        self.mma_pending = np.zeros((2, nw), np.int64)
        self.mma_retire = np.full((2, nw), -10, np.int64)
        self.epoch = 0
        self.cp_groups = []      # pending cp.async groups: list of (words, values, tag, threads)
        self.unfenced = []       # words completed since the last fence
        self.wg_groups = [[], []]  # per warpgroup: committed, not retired: list of lists of ops
        self.wg_open = [[], []]    # issued, not committed
        self.acc = np.zeros((2, 64, 128))  # D per warpgroup (fp64: the data are exact)
        self.st_wavefronts = self.st_quarters = 0  # transposing stores: wavefronts, quarter-warp stores

    # -- shared-memory primitives --
    def _words(self, addr, nbytes, align):
        check(addr % align == 0, f"shared address {addr} not {align}-byte aligned")
        check(0 <= addr and addr + nbytes <= self.q['smem_bytes'], f"shared access {addr}+{nbytes} out of smem")
        return np.arange(addr // 4, (addr + nbytes) // 4)

    def _war_check(self, words, thread, what):
        ep = self.epoch
        check(not self.mma_pending[:, words].any(), f"{what}: write to a word a pending wgmma reads (epoch {ep})")
        # a warpgroup's wgmma.wait_group orders its own threads' later writes; another warpgroup's writes need a
        # barrier after that wait (an earlier epoch)
        other_wg = 1 - (thread >> 7)
        check((self.mma_retire[other_wg, words] < ep).all(),
              f"{what}: write in the epoch where the other warpgroup's wgmma read was retired (no barrier between)")
        other = (self.r_thread[words] != thread) & (self.r_epoch[words] == ep)
        check(not other.any(), f"{what}: write in the epoch of another thread's read (WAR)")
        # write-write by another thread still in flight / unsynchronised
        ww = (self.w_thread[words] != thread) & (self.w_retire[words] >= ep) & (self.w_thread[words] >= 0)
        check(not ww.any(), f"{what}: write races another thread's write")

    def cp_async(self, addr, nbytes, values, stage, thread):  # values: uint32 words (zeros for a zero fill)
        words = self._words(addr, nbytes, nbytes)
        self._war_check(words, thread, "cp.async")
        self.w_issue[words] = self.epoch
        self.w_retire[words] = 1 << 40  # in flight
        self.w_thread[words] = thread
        self.w_fenced[words] = False
        self.cur_group.append((words, np.asarray(values, np.uint32), stage))
        if not self.cp_late:
            self.val[words] = values
            self.tag[words] = stage

    def cp_commit(self):
        self.cp_groups.append(self.cur_group)
        self.cur_group = []

    def cp_wait(self, n):
        while len(self.cp_groups) > n:
            for words, values, stage in self.cp_groups.pop(0):
                self.val[words] = values
                self.tag[words] = stage
                self.w_retire[words] = self.epoch
                self.unfenced.append(words)

    def sts(self, addr, nbytes, values, stage, thread):  # st.shared of nbytes (4: a row lead, 16: a B row)
        words = self._words(addr, nbytes, nbytes)
        self._war_check(words, thread, "st.shared")
        self.val[words] = values
        self.tag[words] = stage
        self.w_issue[words] = self.epoch
        self.w_retire[words] = self.epoch
        self.w_thread[words] = thread
        self.w_fenced[words] = False
        self.unfenced.append(words)

    def lds(self, word, stage, thread):  # generic read of one word (transpose)
        check(0 <= word < self.nw, "lds out of smem")
        check(self.w_retire[word] < self.epoch, f"read of word {word} not completed/synchronised before (RAW)")
        check(self.tag[word] == stage, f"transpose of stage {stage} reads data of stage {self.tag[word]}")
        self.r_epoch[word] = self.epoch
        self.r_thread[word] = thread
        return self.val[word]

    def fence_proxy_async(self):
        for words in self.unfenced:
            self.w_fenced[words] = True
        self.unfenced = []

    def barrier(self):
        self.epoch += 1

    # -- wgmma --
    @staticmethod
    def smem_desc(addr, lbo, sbo):
        return ((addr >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | (((sbo >> 4) & 0x3FFF) << 32)

    @staticmethod
    def desc_words(desc, rows):  # [rows, 8] word indices of a K-major no-swizzle tf32 operand (rows x k8)
        start = (desc & 0x3FFF) << 4
        lbo = ((desc >> 16) & 0x3FFF) << 4
        sbo = ((desc >> 32) & 0x3FFF) << 4
        check(((desc >> 62) & 3) == 0 and ((desc >> 49) & 7) == 0, "descriptor swizzle / base offset bits set")
        r = np.arange(rows)[:, None]
        kk = np.arange(8)[None, :]
        byte = start + (r // 8) * sbo + (r % 8) * 16 + (kk // 4) * lbo + (kk % 4) * 4
        return byte // 4

    def wgmma(self, wgi, da, db, stage):
        wa = self.desc_words(da, 64)    # A: m x k
        wb = self.desc_words(db, 128)   # B: n x k
        words = np.concatenate([wa.ravel(), wb.ravel()])
        check((words >= 0).all() and (words < self.nw).all(), "wgmma operand outside smem")
        self.mma_pending[wgi, words] += 1
        op = (wa, wb, stage, words, self.epoch)
        if not self.mma_late:
            self._mma_read(wgi, op)
        self.wg_open[wgi].append(op)

    def _mma_read(self, wgi, op):
        wa, wb, stage, words, ep = op
        check((self.tag[words] == stage).all(),
              f"wgmma of stage {stage} reads data of stages {sorted(set(self.tag[words].tolist()))}")
        check((self.w_retire[words] < ep).all(), "wgmma reads a word written in its own epoch / in flight")
        check(self.w_fenced[words].all(), "wgmma reads a word not fenced with fence.proxy.async")
        a = (self.val[wa] & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
        b = (self.val[wb] & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
        self.acc[wgi] += a @ b.T

    def wg_commit(self):
        for wgi in range(2):
            self.wg_groups[wgi].append(self.wg_open[wgi])
            self.wg_open[wgi] = []

    def wg_wait(self, n):
        for wgi in range(2):
            while len(self.wg_groups[wgi]) > n:
                for op in self.wg_groups[wgi].pop(0):
                    if self.mma_late:
                        self._mma_read(wgi, op)
                    self.mma_pending[wgi, op[3]] -= 1
                    self.mma_retire[wgi, op[3]] = self.epoch

    # -- the kernel body --
    def coords(self, s):
        q, p = self.q, self.p
        t, ch = divmod(s, q['chunks'])
        tile = self.bx + t * self.grid
        rest, mt = divmod(tile, q['m_tiles'])
        rest, g = divmod(rest, p['G'])
        b, jt = divmod(rest, q['j_tiles'])
        return b, jt * kBN, g, mt, ch

    def issue_a_own_rows(self, s):  # each warpgroup copies the 64 A rows its own wgmma reads
        q = self.q
        if s < self.total:
            b, j0, g, mt, ch = self.coords(s)
            src = ((g * q['m_tiles'] + mt) * q['chunks'] + ch) * q['a_floats']
            dst = (s % kRing) * q['ab_bytes']
            for tid in range(kThreads):
                w = tid >> 7
                for v in range(tid & 127, q['a_floats'] // 8, 128):
                    u = (v // 64) * kBM + w * 64 + v % 64
                    check(src + 4 * u + 4 <= len(self.wpack), "packed weight read out of range")
                    self.cp_async(dst + 16 * u, 16, self.wpack[src + 4 * u: src + 4 * u + 4], s, tid)

    def xread(self, b, c, pos, n):  # n consecutive elements (stride x_stride_l) of x[b, c, pos..]
        p = self.p
        check(0 <= b < p['B'] and 0 <= c < p['Cin'] and 0 <= pos and pos + n <= p['L'],
              f"x read outside the tensor: b {b} c {c} pos {pos}..{pos + n - 1}")
        idx = p['xoff'] + b * p['xsb'] + c * p['xsc'] + (pos + np.arange(n)) * p['xsl']
        return self.xmem[idx].view(np.uint32)

    def issue_raw(self, s):
        q, p = self.q, self.p
        if s < self.total:
            b, j0, g, mt, ch = self.coords(s)
            raw0 = kRing * q['ab_bytes']
            dst0 = raw0 + (s % kRing) * q['raw_bytes']
            leads0 = raw0 + kRing * q['raw_bytes'] + (s % kRing) * kCC * 4
            p0 = j0 * q['s'] - p['P']
            zero4 = np.zeros(4, np.uint32)
            for warp in range(kThreads // 32):
                for r in range(warp, kCC, kThreads // 32):
                    ci = ch * kCC + r
                    c_ok = ci < q['cin_g']
                    c = g * q['cin_g'] + ci
                    dst = dst0 + r * q['wr'] * 4
                    if q['vec']:  # the row's own lead: (row address / 4 + p0) & 3
                        row_word = p['xoff'] + b * p['xsb'] + c * p['xsc']  # x's data pointer is word xoff
                        lead = (row_word + p0) & 3
                        if self.mut == 'lead_plus1':
                            lead = (lead + 1) & 3
                        self.sts(leads0 + 4 * r, 4, lead, s, warp * 32)
                        g0 = p0 - lead
                        for u in range(q['wr'] // 4):
                            th = warp * 32 + u % 32
                            pos = g0 + 4 * u
                            if c_ok and pos >= 0 and pos + 4 <= p['L']:
                                gaddr = (p['xoff'] + b * p['xsb'] + c * p['xsc'] + pos) * 4 + p['x_base']
                                check(gaddr % 16 == 0, "16-byte cp.async source not 16-byte aligned")
                                self.cp_async(dst + 16 * u, 16, self.xread(b, c, pos, 4), s, th)
                            elif (not c_ok) or pos >= p['L'] or pos + 4 <= 0:
                                self.cp_async(dst + 16 * u, 16, zero4, s, th)
                            else:
                                for e in range(4):
                                    ok = 0 <= pos + e < p['L']
                                    v = self.xread(b, c, pos + e, 1) if ok else np.zeros(1, np.uint32)
                                    self.cp_async(dst + 16 * u + 4 * e, 4, v, s, th)
                    else:
                        self.sts(leads0 + 4 * r, 4, 0, s, warp * 32)
                        for t in range(q['span']):
                            th = warp * 32 + t % 32
                            pos = p0 + t
                            ok = c_ok and 0 <= pos < p['L']
                            v = self.xread(b, c, pos, 1) if ok else np.zeros(1, np.uint32)
                            self.cp_async(dst + 4 * t, 4, v, s, th)

    def transpose(self, s):
        q = self.q
        dst = (s % kRing) * q['ab_bytes'] + q['a_floats'] * 4
        S = q['s']
        n = q['span8']
        src = (kRing * q['ab_bytes'] + (s % kRing) * q['raw_bytes']) // 4
        leads = (kRing * q['ab_bytes'] + kRing * q['raw_bytes'] + (s % kRing) * kCC * 4) // 4
        qw = {}  # (instruction, quarter warp) -> 16-byte bank groups of its stores
        for u in range(4 * n):
            th = u % kThreads
            cg, t = divmod(u, n)
            if t >= q['span']:
                continue
            c0 = src + cg * 4 * q['wr'] + t
            v = [self.lds(c0 + i * q['wr'] + int(self.lds(leads + 4 * cg + i, s, th)), s, th) for i in range(4)]
            v = tf32_bits(np.array(v, np.uint32).view(np.float32))
            row = (t % S) * q['wq'] + t // S
            addr = dst + (cg * S * q['wq'] + row) * 16
            qw.setdefault((u // kThreads, (u % kThreads) // 8), []).append((addr // 16) % 8)
            self.sts(addr, 16, v, s, th)
        for banks in qw.values():  # a quarter warp's 16-byte stores: one wavefront when their bank groups differ
            self.st_wavefronts += max(banks.count(bg) for bg in set(banks))
            self.st_quarters += 1

    def check_cursor(self):  # the .cu's Cur / advance: digits stepped by a carrying add of the grid's
        q, p = self.q, self.p
        def digits(tile):
            rest, mt = divmod(tile, q['m_tiles'])
            rest, g = divmod(rest, p['G'])
            b, jt = divmod(rest, q['j_tiles'])
            return [b, jt, g, mt, 0]
        step = digits(self.grid)
        c = digits(self.bx)
        for s in range(self.total + 2):
            if s < self.total:
                b, j0, g, mt, ch = self.coords(s)
                check(c == [b, j0 // kBN, g, mt, ch], f"stage cursor {c} != coords {b, j0 // kBN, g, mt, ch} at {s}")
            c[4] += 1
            if c[4] < q['chunks']:
                continue
            c[4] = 0
            c[3] += step[3]
            carry = int(c[3] >= q['m_tiles'])
            c[3] -= carry * q['m_tiles']
            c[2] += step[2] + carry
            carry = int(c[2] >= p['G'])
            c[2] -= carry * p['G']
            c[1] += step[1] + carry
            carry = int(c[1] >= q['j_tiles'])
            c[1] -= carry * q['j_tiles']
            c[0] += step[0] + carry

    def run(self):
        q, p = self.q, self.p
        self.cur_group = []
        my_tiles = cdiv(q['num_tiles'] - self.bx, self.grid) if q['num_tiles'] > self.bx else 0
        self.total = total = my_tiles * q['chunks']
        self.check_cursor()
        for s0 in range(2):  # groups: {A(s), raw(s)}; A(s + 2) issued after the wgmma wait of stage s
            self.issue_a_own_rows(s0)
            self.issue_raw(s0)
            self.cp_commit()
        for gs in range(total):
            self.cp_wait(2 if self.mut == 'cp_wait2' else 1)
            self.barrier()
            self.transpose(gs)
            if self.mut != 'no_proxy_fence':
                self.fence_proxy_async()
            self.barrier()
            a_base = (gs % kRing) * q['ab_bytes']
            b_base = a_base + q['a_floats'] * 4
            b_lbo = q['s'] * q['wq'] * 16
            for wgi in range(2):
                for k in range(q['k']):
                    kd = k * q['d']
                    rb = (kd % q['s']) * q['wq'] + kd // q['s']
                    for s8 in range(2):
                        da = self.smem_desc(a_base + ((k * 4 + 2 * s8) * kBM + wgi * 64) * 16, kBM * 16, 128)
                        db = self.smem_desc(b_base + (2 * s8) * b_lbo + rb * 16, b_lbo, 128)
                        if self.mut == 'swap_lbo_sbo':
                            da = self.smem_desc(a_base + ((k * 4 + 2 * s8) * kBM + wgi * 64) * 16, 128, kBM * 16)
                        self.wgmma(wgi, da, db, gs)
            self.wg_commit()
            if self.mut != 'no_wg_wait1':
                self.wg_wait(1)
            self.issue_a_own_rows(gs + 2)
            self.issue_raw(gs + 2)
            self.cp_commit()
            b, j0, g, mt, ch = self.coords(gs)
            if ch + 1 < q['chunks']:
                continue
            self.wg_wait(0)
            self.epilogue(b, j0, g, mt)
            self.acc[:] = 0
        self.cp_wait(0)
        self.wg_wait(0)
        check(not self.cp_groups and not any(self.wg_groups), "groups left pending")

    def epilogue(self, b, j0, g, mt):
        q, p = self.q, self.p
        for tid in range(kThreads):
            lane, warp = tid & 31, tid >> 5
            wgi = warp >> 2
            # this thread's accumulator fragment, as the PTX ISA lays out m64nNk8 f32 D
            frag = np.empty(64)
            for rr in range(64):
                i, h, c = rr // 4, (rr % 4) // 2, rr % 2
                frag[rr] = self.acc[wgi][16 * (warp % 4) + lane // 4 + 8 * h, 8 * i + 2 * (lane % 4) + c]
            # the kernel's epilogue
            r0 = wgi * 64 + (warp & 3) * 16 + (lane >> 2)
            for h in range(2):
                co = mt * kBM + r0 + 8 * h
                if co >= q['cout_g']:
                    continue
                bv = p['bias'][g * q['cout_g'] + co] if p['bias'] is not None else 0.0
                yr = p['yoff'] + b * p['ysb'] + (g * q['cout_g'] + co) * p['ysc']
                for i in range(16):
                    j = j0 + 8 * i + 2 * (lane & 3)
                    v0 = frag[4 * i + 2 * h] + bv
                    v1 = frag[4 * i + 2 * h + 1] + bv
                    for jj, v in ((j, v0), (j + 1, v1)):
                        if jj < p['Lout']:
                            self.ymem[yr + jj * p['ysl']] = v
                            self.ycount[yr + jj * p['ysl']] += 1


def run_case(name, B, Cin, Cout, K, L, S, D, P, G, Lout=None, sms=2, x_layout='bcl', x_pad=0, x_base=0,
             y_layout='bcl', modes=((True, True), (False, False), (True, False), (False, True)), ints=True, seed=0,
             mut=None, quiet=False):
    rng = np.random.default_rng(seed)
    if Lout is None:
        Lout = (L + 2 * P - D * (K - 1) - 1) // S + 1
    cin_g = Cin // G
    # x: logical (B, Cin, L) inside a flat allocation; 'bcl' rows of L + x_pad, 'blc' channels-last (x_stride_l = Cin)
    if x_layout == 'bcl':
        xsl, xsc = 1, L + x_pad
        xsb = Cin * xsc
    else:
        xsc, xsl = 1, Cin
        xsb = L * Cin
    xoff = x_base // 4 if x_base % 4 == 0 else None
    assert xoff is not None
    xsize = xoff + (B - 1) * xsb + (Cin - 1) * xsc + (L - 1) * xsl + 1
    xmem = np.full(xsize, np.nan, np.float32)
    xl = (rng.integers(-4, 5, (B, Cin, L)) if ints else rng.standard_normal((B, Cin, L))).astype(np.float32)
    bb, cc, ll = np.meshgrid(np.arange(B), np.arange(Cin), np.arange(L), indexing='ij')
    xmem[xoff + bb * xsb + cc * xsc + ll * xsl] = xl
    w = (rng.integers(-3, 4, (Cout, cin_g, K)) if ints else rng.standard_normal((Cout, cin_g, K))).astype(np.float32)
    bias = rng.integers(-5, 6, Cout).astype(np.float32)
    if y_layout == 'bcl':
        ysl, ysc, ysb = 1, Lout, Cout * Lout
    else:
        ysc, ysl, ysb = 1, Cout, Lout * Cout
    yoff = 3
    ysize = yoff + B * Cout * Lout + 5
    p = dict(B=B, Cin=Cin, Cout=Cout, K=K, L=L, S=S, D=D, P=P, G=G, Lout=Lout, x_ptr=x_base, x_base=0,
             xsb=xsb, xsc=xsc, xsl=xsl, xoff=xoff, wso=cin_g * K, wsi=K, wsk=1, ysb=ysb, ysc=ysc, ysl=ysl,
             yoff=yoff, bias=bias)
    q = make_plan(p)
    if q is None:
        print(f"{name:24s} not supported by the plan")
        return True
    wpack = pack(p, q, w.ravel())
    # reference: direct conv of the TF32-rounded operands (fp64)
    xr = tf32_val(xl).astype(np.float64)
    wr = tf32_val(w).astype(np.float64)
    ref = np.zeros((B, Cout, Lout)) + bias[None, :, None]
    for co in range(Cout):
        g = co // (Cout // G)
        for ci in range(cin_g):
            for k in range(K):
                pos = np.arange(Lout) * S + k * D - P
                ok = (pos >= 0) & (pos < L)
                ref[:, co, ok] += wr[co, ci, k] * xr[:, g * cin_g + ci, pos[ok]]
    grid = min(q['num_tiles'], sms)
    ok_all = True
    for cp_late, mma_late in modes:
        ymem = np.full(ysize, np.nan)
        ycount = np.zeros(ysize, np.int64)
        wavefronts = quarters = 0
        try:
            for bx in range(grid):
                blk = Block(p, q, wpack, xmem, ymem, ycount, bx, grid, cp_late, mma_late, mut)
                blk.run()
                wavefronts += blk.st_wavefronts
                quarters += blk.st_quarters
            bq, cq, lq = np.meshgrid(np.arange(B), np.arange(Cout), np.arange(Lout), indexing='ij')
            yidx = yoff + bq * ysb + cq * ysc + lq * ysl
            y = ymem[yidx]
            cnt = ycount[yidx]
            check(ycount.sum() == cnt.sum(), "y written outside its logical extent")
            check((cnt == 1).all(), f"y elements written {cnt.min()}..{cnt.max()} times "
                                    f"({int((cnt == 0).sum())} never)")
            err = np.abs(y - ref).max()
            tol = 0 if ints else 1e-9 * max(1.0, np.abs(ref).max())
            check(err <= tol, f"y differs from the direct conv: max abs err {err}")
            res = "ok"
        except Fail as e:
            res = f"FAIL: {e}"
            ok_all = False
        if quiet:
            continue
        print(f"{name:24s} plan span {q['span']:4d} wq {q['wq']:4d} wr {q['wr']:4d} vec {q['vec']} "
              f"smem {q['smem_bytes']:6d} tiles {q['num_tiles']:3d} grid {grid}  cp_late {int(cp_late)} "
              f"mma_late {int(mma_late)}: {res}; transposing stores {wavefronts / max(quarters, 1):.2f} "
              f"wavefronts per quarter warp")
        sys.stdout.flush()
    return ok_all


CASES = [
    # name, B, Cin, Cout, K, L, S, D, P, G, extra
    ("s1_k3_p1", 2, 64, 128, 3, 300, 1, 1, 1, 1, {}),
    ("s1_oddcout_cin20", 1, 20, 200, 3, 261, 1, 1, 1, 1, {}),
    ("s2_p1", 2, 48, 96, 3, 301, 2, 1, 1, 1, {}),
    ("s3_d4_p0", 1, 32, 64, 3, 600, 3, 4, 0, 1, {}),
    ("g2_d2_k5_p4", 1, 32, 80, 5, 277, 1, 2, 4, 2, {}),
    ("g2_cin_g10_p2", 2, 20, 140, 3, 200, 1, 1, 2, 2, {}),
    ("s1_p3_lead1", 1, 17, 33, 2, 140, 1, 1, 3, 1, {}),
    ("k1_s4_p5", 1, 9, 20, 1, 1100, 4, 1, 5, 1, {}),
    ("k7_d1_p3", 1, 16, 16, 7, 200, 1, 1, 3, 1, {}),
    ("k8_unsupported", 1, 16, 16, 8, 200, 1, 1, 3, 1, {}),
    ("padded_rows_aligned", 1, 24, 40, 3, 203, 2, 1, 1, 1, dict(x_pad=1)),
    ("unaligned_rows", 1, 24, 40, 3, 203, 2, 1, 1, 1, {}),
    ("unaligned_ptr", 1, 24, 40, 3, 204, 1, 2, 2, 1, dict(x_base=4)),
    ("channels_last_x_y", 2, 20, 36, 3, 150, 1, 1, 1, 1, dict(x_layout='blc', y_layout='blc')),
    ("short_L_bigpad", 1, 16, 24, 5, 30, 1, 3, 9, 1, {}),
    ("float_s2_d2", 1, 40, 72, 4, 260, 2, 2, 3, 1, dict(ints=False)),
    # the small cases of the .cu's main() (one block per 4 SMs' worth of tiles, two modes)
    ("main_small_s1", 2, 64, 128, 3, 1000, 1, 1, 1, 1, dict(sms=5, modes=((True, True), (False, False)))),
    ("main_small_s1_odd_cout", 2, 40, 200, 3, 1003, 1, 1, 1, 1, dict(sms=5, modes=((True, True), (False, False)))),
    ("main_small_s2", 2, 48, 96, 3, 1001, 2, 1, 1, 1, dict(sms=3, modes=((True, True), (False, False)))),
    ("main_small_s3_d4", 2, 32, 64, 3, 2000, 3, 4, 0, 1, dict(sms=3, modes=((True, True), (False, False)))),
    ("main_small_g2_d2", 1, 32, 80, 5, 777, 1, 2, 4, 2, dict(sms=3, modes=((True, True), (False, False)))),
]

# Self test: each deliberate bug must make the model fail (run with --selftest).
MUTANTS = ['swap_lbo_sbo', 'cp_wait2', 'no_proxy_fence', 'no_wg_wait1', 'lead_plus1']

if __name__ == "__main__":
    only = sys.argv[1] if len(sys.argv) > 1 else None
    if only == '--selftest':
        bad = 0
        for m in MUTANTS:
            caught = not run_case("s1_k3_p1", 2, 64, 128, 3, 300, 1, 1, 1, 1, mut=m, quiet=True,
                                  modes=((True, True), (False, False)))
            print(f"mutant {m:16s}: {'caught' if caught else 'NOT caught'}")
            bad += not caught
        sys.exit(1 if bad else 0)
    fails = 0
    for c in CASES:
        if only and only != c[0]:
            continue
        fails += not run_case(*c[:10], **c[10])
    print("emulator: all cases ok" if fails == 0 else f"emulator: {fails} case(s) FAILED")
    sys.exit(1 if fails else 0)
