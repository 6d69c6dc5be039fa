// Whether autodiff records the graph on this thread. NoGradScope turns recording off for a
// block (evaluation, optimizer steps); EnableGradScope turns it back on (a forward recomputed
// during backward, nn/recompute.h); scopes nest.
#ifndef KILN_AUTODIFF_GRAD_MODE_H_
#define KILN_AUTODIFF_GRAD_MODE_H_

namespace kiln {

bool GradEnabled();

class NoGradScope {
 public:
  NoGradScope();
  ~NoGradScope();
  NoGradScope(const NoGradScope&) = delete;
  NoGradScope& operator=(const NoGradScope&) = delete;

 private:
  bool previous_;
};

class EnableGradScope {
 public:
  EnableGradScope();
  ~EnableGradScope();
  EnableGradScope(const EnableGradScope&) = delete;
  EnableGradScope& operator=(const EnableGradScope&) = delete;

 private:
  bool previous_;
};

}  // namespace kiln

#endif  // KILN_AUTODIFF_GRAD_MODE_H_
