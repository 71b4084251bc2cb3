/* mlopt's valgrind tool (mlopt-bbseq): the ordered machine-basic-block trace
 * of one object of a program.
 *
 *   valgrind --tool=mlopt-bbseq --blocks=FILE --object=PATH --out=FILE PROGRAM ...
 *
 * --blocks: the object's block start addresses at link time (a little-endian
 * uint64 count, then that many ascending uint64s), from its BB address map.
 * --object: the object's absolute path (as valgrind's debug info names it).
 * --out: written with one little-endian uint32 per block entry, the index of
 * the entered block's start in --blocks, in execution order. An entry is the
 * execution reaching a block's first instruction (a jump to it or falling
 * through into it); a return into the middle of a block is not an entry.
 *
 * Contract: every instruction runs unchanged; the only effect on the program
 * is time. A write that fails ends the run with exit code 3 and a message;
 * nothing else is written anywhere. Built by CMake against valgrind's
 * tool libraries (Debian package valgrind) when they are installed.
 */
#include "pub_tool_basics.h"
#include "pub_tool_debuginfo.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"
#include "pub_tool_tooliface.h"

static const HChar *clo_blocks = NULL;
static const HChar *clo_object = NULL;
static const HChar *clo_out = NULL;

static ULong *starts = NULL; /* ascending link-time block starts */
static ULong n_starts = 0;
static Int out_fd = -1;

#define BUFFERED 65536
static UInt buffer[BUFFERED];
static UInt buffered = 0;

static void flush(void) {
  const HChar *p = (const HChar *)buffer;
  Int left = (Int)(buffered * sizeof(UInt));
  while (left > 0) {
    Int w = VG_(write)(out_fd, p, left);
    if (w <= 0) {
      VG_(umsg)("mlopt-bbseq: writing %s failed\n", clo_out);
      VG_(exit)(3);
    }
    p += w;
    left -= w;
  }
  buffered = 0;
}

static VG_REGPARM(1) void enter_block(UWord index) {
  buffer[buffered++] = (UInt)index;
  if (buffered == BUFFERED)
    flush();
}

static Bool process_option(const HChar *arg) {
  if VG_STR_CLO (arg, "--blocks", clo_blocks) {
  } else if VG_STR_CLO (arg, "--object", clo_object) {
  } else if VG_STR_CLO (arg, "--out", clo_out) {
  } else
    return False;
  return True;
}

static void print_usage(void) {
  VG_(printf)("    --blocks=FILE   link-time block starts: uint64 count, ascending uint64s\n"
              "    --object=PATH   the object they are in (absolute path)\n"
              "    --out=FILE      written with a uint32 block index per block entry\n");
}

static void print_debug_usage(void) {}

static void read_exactly(Int fd, void *into, Long bytes) {
  Long got = 0;
  while (got < bytes) {
    Long want = bytes - got > (1 << 30) ? (1 << 30) : bytes - got;
    Int n = VG_(read)(fd, (HChar *)into + got, (Int)want);
    if (n <= 0)
      VG_(fmsg_bad_option)("--blocks", "%s is truncated\n", clo_blocks);
    got += n;
  }
}

static void post_clo_init(void) {
  if (!clo_blocks || !clo_object || !clo_out)
    VG_(fmsg_bad_option)("mlopt-bbseq", "--blocks, --object and --out are all required\n");
  SysRes r = VG_(open)(clo_blocks, VKI_O_RDONLY, 0);
  if (sr_isError(r))
    VG_(fmsg_bad_option)("--blocks", "cannot open %s\n", clo_blocks);
  Int fd = (Int)sr_Res(r);
  read_exactly(fd, &n_starts, sizeof n_starts);
  if (n_starts > (1ULL << 32))
    VG_(fmsg_bad_option)("--blocks", "%s: %llu blocks (at most 2^32)\n", clo_blocks, n_starts);
  starts = VG_(malloc)("mlopt-bbseq.starts", n_starts * sizeof(ULong) + sizeof(ULong));
  read_exactly(fd, starts, (Long)(n_starts * sizeof(ULong)));
  VG_(close)(fd);
  r = VG_(open)(clo_out, VKI_O_WRONLY | VKI_O_CREAT | VKI_O_TRUNC, 0600);
  if (sr_isError(r))
    VG_(fmsg_bad_option)("--out", "cannot open %s\n", clo_out);
  out_fd = (Int)sr_Res(r);
}

/* The index of a block starting at link-time address a, or -1. */
static Long find_block(ULong a) {
  ULong lo = 0, hi = n_starts;
  while (lo < hi) {
    ULong mid = lo + (hi - lo) / 2;
    if (starts[mid] < a)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n_starts && starts[lo] == a ? (Long)lo : -1;
}

static IRSB *instrument(VgCallbackClosure *closure, IRSB *in, const VexGuestLayout *layout,
                        const VexGuestExtents *extents, const VexArchInfo *host, IRType guest_word,
                        IRType host_word) {
  IRSB *out = deepCopyIRSBExceptStmts(in);
  DiEpoch epoch = VG_(current_DiEpoch)();
  for (Int i = 0; i < in->stmts_used; i++) {
    IRStmt *st = in->stmts[i];
    addStmtToIRSB(out, st);
    if (st->tag != Ist_IMark)
      continue;
    Addr a = st->Ist.IMark.addr;
    DebugInfo *di = VG_(find_DebugInfo)(epoch, a);
    if (!di)
      continue;
    const HChar *name = VG_(DebugInfo_get_filename)(di);
    if (!name || VG_(strcmp)(name, clo_object) != 0)
      continue;
    Long k = find_block((ULong)(a - VG_(DebugInfo_get_text_bias)(di)));
    if (k < 0)
      continue;
    IRDirty *d = unsafeIRDirty_0_N(1, "mlopt_bbseq_enter_block", VG_(fnptr_to_fnentry)(enter_block),
                                   mkIRExprVec_1(mkIRExpr_HWord((HWord)k)));
    addStmtToIRSB(out, IRStmt_Dirty(d));
  }
  return out;
}

static void fini(Int exit_code) {
  if (out_fd >= 0) {
    flush();
    VG_(close)(out_fd);
  }
}

static void pre_clo_init(void) {
  VG_(details_name)("mlopt-bbseq");
  VG_(details_version)(NULL);
  VG_(details_description)("the ordered machine-basic-block trace for mlopt's trace reward");
  VG_(details_copyright_author)("mlopt");
  VG_(details_bug_reports_to)("mlopt");
  VG_(basic_tool_funcs)(post_clo_init, instrument, fini);
  VG_(needs_command_line_options)(process_option, print_usage, print_debug_usage);
}

VG_DETERMINE_INTERFACE_VERSION(pre_clo_init)
