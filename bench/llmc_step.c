// The llm.c peer of examples/gpt (issue 30): Karpathy's train_gpt2.c (its CPU reference, never
// committed here) trains the same byte-level GPT on the same corpus, with the same init as
// nn::Gpt, through its own forward, backward and AdamW update. Built and run by bench/llmc.sh,
// which compiles this file with llm.c's Makefile flags and llm.c's folder on the include path.
//
//   OMP_NUM_THREADS=2 ./llmc_step --steps=30 --layers=6 --heads=6 --width=384 --context=256
//
// Ends with one JSON line: ms_per_step (the median of the steps after --timing_warmup),
// first_loss, loss (the last step's), val_loss (the validation windows of bench/gpt_torch.py),
// loss_curve ([step, mean train loss of the steps up to it]). llm.c prints a line of its own
// before it ("num_activations: ..."), so read the last line.
//
// What differs from kiln and torch: llm.c's CPU update has no gradient clipping and decays every
// parameter alike (LayerNorm gains and biases too), so weight decay is off by default here, as in
// llm.c's own main; the learning-rate schedule (warm-up, cosine to lr/10) and betas are kiln's.
#define main llmc_main  // llm.c's own main (a GPT-2 checkpoint and tokenizer we don't have) is unused
#include "train_gpt2.c"
#undef main

#include <dirent.h>
#include <sys/stat.h>

typedef struct {
  int layers, heads, width, context, batch, vocab, steps, timing_warmup, warmup, eval_batches;
  double lr, weight_decay;
  uint64_t seed;
  const char* data_dir;
} Options;

static void Fail(const char* what, const char* detail) {
  fprintf(stderr, "llmc_step: %s%s\n", what, detail);
  exit(2);
}

// --name=VALUE as an integer in [lo, hi]; returns 0 when `arg` is not --name=...
static int IntFlag(const char* arg, const char* name, long lo, long hi, int* out) {
  size_t n = strlen(name);
  if (strncmp(arg, "--", 2) != 0 || strncmp(arg + 2, name, n) != 0 || arg[2 + n] != '=') return 0;
  char* end;
  long v = strtol(arg + 3 + n, &end, 10);
  if (*end != '\0' || end == arg + 3 + n || v < lo || v > hi) Fail("bad value: ", arg);
  *out = (int)v;
  return 1;
}

static int RealFlag(const char* arg, const char* name, double* out) {
  size_t n = strlen(name);
  if (strncmp(arg, "--", 2) != 0 || strncmp(arg + 2, name, n) != 0 || arg[2 + n] != '=') return 0;
  char* end;
  double v = strtod(arg + 3 + n, &end);
  if (*end != '\0' || end == arg + 3 + n || !(v >= 0 && v < 1e3)) Fail("bad value: ", arg);
  *out = v;
  return 1;
}

static Options Parse(int argc, char** argv) {
  // Issue 30's larger configuration; kiln's hyper-parameters.
  Options o = {6, 6, 384, 256, 8, 256, 30, 3, 100, 16, 1e-3, 0.0, 1, "/usr/share/games/fortunes"};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    int seed = -1;
    if (IntFlag(a, "layers", 1, 1000, &o.layers) || IntFlag(a, "heads", 1, 1000, &o.heads) ||
        IntFlag(a, "width", 1, 100000, &o.width) || IntFlag(a, "context", 2, 100000, &o.context) ||
        IntFlag(a, "batch_size", 1, 100000, &o.batch) || IntFlag(a, "vocab", 256, 1000000, &o.vocab) ||
        IntFlag(a, "steps", 1, 10000000, &o.steps) || IntFlag(a, "timing_warmup", 0, 10000000, &o.timing_warmup) ||
        IntFlag(a, "warmup", 0, 10000000, &o.warmup) || IntFlag(a, "eval_batches", 0, 100000, &o.eval_batches) ||
        RealFlag(a, "lr", &o.lr) || RealFlag(a, "weight_decay", &o.weight_decay)) {
      continue;
    }
    if (IntFlag(a, "seed", 0, 2147483647, &seed)) {
      o.seed = (uint64_t)seed;
    } else if (strncmp(a, "--data_dir=", 11) == 0) {
      o.data_dir = a + 11;
    } else {
      Fail("unknown flag: ", a);
    }
  }
  if (o.width % o.heads != 0) Fail("--width must be a multiple of --heads", "");
  if (o.steps <= o.timing_warmup) Fail("--steps must exceed --timing_warmup", "");
  return o;
}

// splitmix64: the batches' and the init's random numbers.
static uint64_t NextU64(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static float Normal(uint64_t* s, float std) {  // Box-Muller
  double u1 = ((NextU64(s) >> 11) + 1.0) / 9007199254740993.0, u2 = (NextU64(s) >> 11) / 9007199254740992.0;
  return (float)(std * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

static void FillNormal(float* p, size_t n, float std, uint64_t* s) {
  for (size_t i = 0; i < n; ++i) p[i] = Normal(s, std);
}

static void FillConstant(float* p, size_t n, float value) {
  for (size_t i = 0; i < n; ++i) p[i] = value;
}

// What gpt2_build_from_checkpoint does, with nn::Gpt's (GPT-2's) init instead of a file: normal
// std 0.02, the residual projections 0.02/sqrt(2L), biases 0, LayerNorm gains 1; the vocabulary
// padded to a multiple of 128 as llm.c's exporter does, the padded rows zero.
static void BuildModel(GPT2* model, const Options* o) {
  GPT2Config c = {.max_seq_len = o->context,
                  .vocab_size = o->vocab,
                  .padded_vocab_size = (o->vocab + 127) / 128 * 128,
                  .num_layers = o->layers,
                  .num_heads = o->heads,
                  .channels = o->width};
  memset(model, 0, sizeof(*model));
  model->config = c;
  fill_in_parameter_sizes(model->param_sizes, c);
  for (int i = 0; i < NUM_PARAMETER_TENSORS; ++i) model->num_parameters += model->param_sizes[i];
  model->params_memory = malloc_and_point_parameters(&model->params, model->param_sizes);
  memset(model->params_memory, 0, model->num_parameters * sizeof(float));
  model->mean_loss = -1.0f;

  ParameterTensors* p = &model->params;
  size_t L = c.num_layers, C = c.channels;
  uint64_t s = o->seed;
  FillNormal(p->wte, (size_t)c.vocab_size * C, 0.02f, &s);
  FillNormal(p->wpe, (size_t)c.max_seq_len * C, 0.02f, &s);
  FillNormal(p->qkvw, L * 3 * C * C, 0.02f, &s);
  FillNormal(p->attprojw, L * C * C, 0.02f / sqrtf(2.0f * L), &s);
  FillNormal(p->fcw, L * 4 * C * C, 0.02f, &s);
  FillNormal(p->fcprojw, L * 4 * C * C, 0.02f / sqrtf(2.0f * L), &s);
  FillConstant(p->ln1w, L * C, 1.0f);
  FillConstant(p->ln2w, L * C, 1.0f);
  FillConstant(p->lnfw, C, 1.0f);
}

static int CompareNames(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

static int IsText(const char* dir, const char* name) {
  size_t n = strlen(name);
  if (name[0] == '.' || (n >= 4 && strcmp(name + n - 4, ".dat") == 0) || (n >= 3 && strcmp(name + n - 3, ".u8") == 0)) {
    return 0;
  }
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// The corpus as examples/gpt and bench/gpt_torch.py read it: the folder's plain files (no
// dotfiles, no fortune's .dat indices or .u8 links) in byte order of their names, concatenated.
static uint8_t* ReadCorpus(const char* dir, size_t* size) {
  DIR* d = opendir(dir);
  if (d == NULL) Fail("cannot open the corpus folder ", dir);
  char* names[4096];
  int count = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL && count < 4096;) {
    if (IsText(dir, e->d_name)) names[count++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, count, sizeof names[0], CompareNames);
  uint8_t* text = NULL;
  *size = 0;
  for (int i = 0; i < count; ++i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    FILE* f = fopenCheck(path, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = realloc(text, *size + n);
    freadCheck(text + *size, 1, n, f);
    fcloseCheck(f);
    *size += n;
    free(names[i]);
  }
  return text;
}

// Rows b of (inputs, targets): the windows text[start_b .. start_b + T] shifted by one.
static void Windows(const uint8_t* text, const size_t* starts, int B, int T, int* inputs, int* targets) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      inputs[b * T + t] = text[starts[b] + t];
      targets[b * T + t] = text[starts[b] + t + 1];
    }
  }
}

// kiln's schedule (examples/gpt): linear warm-up, then cosine to lr/10 at the last step.
static float LearningRate(const Options* o, int step) {
  if (step < o->warmup) return (float)(o->lr * (step + 1) / o->warmup);
  int span = o->steps - o->warmup > 1 ? o->steps - o->warmup : 1;
  double t = fmin(1.0, (double)(step - o->warmup) / span);
  return (float)(o->lr / 10 + 0.5 * (o->lr - o->lr / 10) * (1 + cos(M_PI * t)));
}

// The mean loss over bench/gpt_torch.py's validation windows: eval_batches batches spread
// evenly over the held-out tenth.
static float ValLoss(GPT2* model, const Options* o, const uint8_t* val, size_t val_size, int* inputs, int* targets) {
  int B = o->batch, T = o->context;
  size_t n = (size_t)o->eval_batches * B, span = val_size - T - 1, starts[B];
  double total = 0;
  for (int b = 0; b < o->eval_batches; ++b) {
    for (int i = 0; i < B; ++i) starts[i] = ((size_t)b * B + i) * span / n;
    Windows(val, starts, B, T, inputs, targets);
    gpt2_forward(model, inputs, targets, B, T);
    total += model->mean_loss;
  }
  return o->eval_batches > 0 ? (float)(total / o->eval_batches) : NAN;
}

static double Seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static int CompareDoubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

// The JSON line: the median step time after the warm-up steps, the losses, the curve at ten
// points (each the mean train loss of the steps since the previous point).
static void Report(const Options* o, GPT2* model, double* ms, const float* losses, float val_loss) {
  int timed = o->steps - o->timing_warmup;
  qsort(ms + o->timing_warmup, timed, sizeof ms[0], CompareDoubles);
  double median = timed % 2 ? ms[o->timing_warmup + timed / 2]
                            : 0.5 * (ms[o->timing_warmup + timed / 2 - 1] + ms[o->timing_warmup + timed / 2]);
  printf("{\"peer\":\"llm.c\",\"ms_per_step\":%.2f,\"first_loss\":%.4f,\"loss\":%.4f,\"val_loss\":%.4f,", median,
         losses[0], losses[o->steps - 1], val_loss);
  printf("\"steps\":%d,\"timing_warmup\":%d,\"threads\":%d,\"parameters\":%zu,\"loss_curve\":[", o->steps,
         o->timing_warmup, omp_get_max_threads(), model->num_parameters);
  int every = o->steps >= 10 ? o->steps / 10 : 1;
  double sum = 0;
  for (int s = 0, from = 0; s < o->steps; ++s) {
    sum += losses[s];
    if ((s + 1) % every == 0 || s + 1 == o->steps) {
      printf("%s[%d,%.4f]", from ? "," : "", s + 1, sum / (s + 1 - from));
      sum = 0;
      from = s + 1;
    }
  }
  printf("]}\n");
}

int main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  size_t size;
  uint8_t* text = ReadCorpus(o.data_dir, &size);
  size_t split = size * 9 / 10;
  if (size - split < (size_t)o.context + 2) Fail("the corpus is too small for --context in ", o.data_dir);
  GPT2 model;
  BuildModel(&model, &o);
  int B = o.batch, T = o.context;
  int* inputs = mallocCheck(sizeof(int) * B * T);
  int* targets = mallocCheck(sizeof(int) * B * T);
  double* ms = mallocCheck(sizeof(double) * o.steps);
  float* losses = mallocCheck(sizeof(float) * o.steps);
  size_t starts[B];
  uint64_t batches = o.seed ^ 0x5DEECE66Dull;
  for (int step = 0; step < o.steps; ++step) {
    double start = Seconds();  // the batch's making counted too, as kiln's and torch's timers do
    for (int b = 0; b < B; ++b) starts[b] = NextU64(&batches) % (split - T - 1);
    Windows(text, starts, B, T, inputs, targets);
    gpt2_forward(&model, inputs, targets, B, T);
    gpt2_zero_grad(&model);
    gpt2_backward(&model);
    gpt2_update(&model, LearningRate(&o, step), 0.9f, 0.99f, 1e-8f, (float)o.weight_decay, step + 1);
    ms[step] = 1000 * (Seconds() - start);
    losses[step] = model.mean_loss;
  }
  float val_loss = ValLoss(&model, &o, text + split, size - split, inputs, targets);
  Report(&o, &model, ms, losses, val_loss);
  gpt2_free(&model);
  free(text);
  return 0;
}
